package trie_test

import (
	"errors"
	"fmt"
	"log"

	trie "github.com/libtrie/libtrie/bindings/go"
)

// A whole decode against a tiny hand-made vocabulary (a real one comes from trie.LoadGGUF): at each step the
// mask restricts the model's choice; here the "model" takes the longest allowed token. ("c" is never allowed
// after ".": no token spells the rest, "reate" or "lose".)
func Example() {
	tokens := []string{"</s>", "git", "hub", "github", ".", "create", "close", "_issue", "c", "slack"}
	spec := trie.VocabSpec{EOGIDs: []int32{0}}
	for i, t := range tokens {
		spec.Tokens = append(spec.Tokens, []byte(t))
		kind := trie.TokenNormal
		if i == 0 {
			kind = trie.TokenControl
		}
		spec.Kinds = append(spec.Kinds, kind)
	}
	vocab, err := trie.NewVocab(spec)
	if err != nil {
		log.Fatal(err)
	}
	defer vocab.Close()
	a, err := vocab.Compile([]string{"github.create_issue", "github.close_issue"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	// docs:begin decode
	mask := a.NewMask()
	text := ""
	for s := a.Start(); s != trie.StateFinished; {
		if err := a.Mask(s, mask); err != nil { // what an engine applies to the logits
			log.Fatal(err)
		}
		allowed := a.Allowed(s)
		best := allowed[0]
		for _, t := range allowed {
			if len(tokens[t]) > len(tokens[best]) && t != 0 {
				best = t
			}
		}
		fmt.Printf("allowed %v -> %q\n", allowed, tokens[best])
		if s, err = a.Advance(s, best); err != nil {
			log.Fatal(err)
		}
		if s != trie.StateFinished {
			text += tokens[best]
		}
	}
	fmt.Println(text)
	// docs:end decode
	// Output:
	// allowed [1 3] -> "github"
	// allowed [4] -> "."
	// allowed [5 6] -> "create"
	// allowed [7] -> "_issue"
	// allowed [0] -> "</s>"
	// github.create_issue
}

// Advance rejects a token that would leave the set; the state is unchanged.
func ExampleAutomaton_Advance() {
	vocab, _ := trie.NewVocab(trie.VocabSpec{
		Tokens: [][]byte{[]byte("</s>"), []byte("yes"), []byte("no"), []byte("maybe")},
		Kinds:  []trie.TokenKind{trie.TokenControl, 0, 0, 0},
		EOGIDs: []int32{0},
	})
	defer vocab.Close()
	a, _ := vocab.Compile([]string{"yes", "no"}, nil)
	defer a.Close()

	s, err := a.Advance(a.Start(), 3) // "maybe"
	fmt.Println(s, errors.Is(err, trie.ErrTokenRejected))
	var e *trie.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status)
	}
	s, err = a.Advance(a.Start(), 1) // "yes"
	fmt.Println(a.IsAccepting(s), err)
	// Output:
	// 0 true
	// token rejected
	// true <nil>
}
