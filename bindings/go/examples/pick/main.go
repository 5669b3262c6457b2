// Command pick chooses, for each line of input, one member of a set (a tool name such as github.create_issue)
// by decoding under libtrie's constraint with a toy scorer in place of a language model: at every step it
// takes the allowed token whose text best overlaps the words of the line, and once a single member is left it
// completes it with the forced tokens. Whatever the scorer does, the output is always a member of the set.
//
//	go run ./examples/pick VOCAB.gguf SET.txt [INPUT]      (INPUT: default standard input)
//
// An input line "question<TAB>expected" also checks the pick against the expected member.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	trie "github.com/libtrie/libtrie/bindings/go"
)

func main() {
	if len(os.Args) < 3 || len(os.Args) > 4 {
		fmt.Fprintln(os.Stderr, "usage: pick VOCAB.gguf SET.txt [INPUT]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3:]); err != nil {
		fmt.Fprintln(os.Stderr, "pick:", err)
		os.Exit(1)
	}
}

func run(vocabPath, setPath string, inputPath []string) error {
	members, err := readLines(setPath)
	if err != nil {
		return err
	}
	// docs:begin compile
	vocab, err := trie.LoadGGUF(vocabPath) // or trie.NewVocab(spec): your engine's own token list
	if err != nil {
		return err
	}
	defer vocab.Close()
	a, err := vocab.Compile(members, &trie.CompileOptions{DropUnreachable: true})
	// docs:end compile
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Printf("libtrie %s: %d members, %d states, vocabulary of %d tokens\n", trie.Version(), a.NMembers(),
		a.NStates(), vocab.NTokens())

	p, err := newPicker(vocab, a)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	if len(inputPath) == 1 {
		f, err := os.Open(inputPath[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, hits, checked := 0, 0, 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		question, expected, hasExpected := strings.Cut(line, "\t")
		member, nTokens, err := p.pick(question)
		if err != nil {
			return err
		}
		n++
		verdict := ""
		if hasExpected {
			checked++
			if member == expected {
				hits++
				verdict = "  (as expected)"
			} else {
				verdict = "  (expected " + expected + ")"
			}
		}
		fmt.Printf("%s  <-  %s  [%d tokens]%s\n", member, question, nTokens, verdict)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if checked > 0 {
		fmt.Printf("%d/%d picks as expected (toy scorer); %d/%d picks are members of the set\n", hits, checked, n, n)
	}
	return nil
}

type picker struct {
	a      *trie.Automaton
	tokens [][]byte
	eog    map[int32]bool
	mask   []uint32
}

func newPicker(v *trie.Vocab, a *trie.Automaton) (*picker, error) {
	p := &picker{a: a, tokens: make([][]byte, v.NTokens()), eog: map[int32]bool{}, mask: a.NewMask()}
	for i := range p.tokens {
		b, err := v.Token(int32(i))
		if err != nil {
			return nil, err
		}
		p.tokens[i] = b
	}
	eog, err := v.EOGIDs()
	if err != nil {
		return nil, err
	}
	for _, id := range eog {
		p.eog[id] = true
	}
	return p, nil
}

// pick decodes one member for the question and returns it with the number of tokens it took.
func (p *picker) pick(question string) (string, int, error) {
	words := keywords(question)
	var text []byte
	var allowed []int32
	n := 0
	s := p.a.Start()
	for s != trie.StateFinished {
		// An engine would apply the mask to the logits here; the toy scorer only looks at the allowed list.
		if err := p.a.Mask(s, p.mask); err != nil {
			return "", 0, err
		}
		if f, err := p.a.Forced(s); err != nil {
			return "", 0, err
		} else if f != nil && len(f.Tokens) > 0 {
			for _, t := range f.Tokens {
				if s, err = p.a.Advance(s, t); err != nil {
					return "", 0, err
				}
				text = append(text, p.tokens[t]...)
				n++
			}
			continue
		}
		var err error
		if allowed, err = p.a.AppendAllowed(allowed[:0], s); err != nil {
			return "", 0, err
		}
		best, bestScore := int32(-1), 0.0
		for _, t := range allowed {
			var sc float64
			if p.eog[t] {
				sc = score(text, words) + 0.25 // end here unless a continuation adds to the overlap
			} else {
				sc = score(append(text, p.tokens[t]...), words) + 0.01*float64(len(p.tokens[t]))
			}
			if best < 0 || sc > bestScore {
				best, bestScore = t, sc
			}
		}
		if s, err = p.a.Advance(s, best); err != nil {
			return "", 0, err
		}
		if s != trie.StateFinished {
			text = append(text, p.tokens[best]...)
			n++
		}
	}
	return string(text), n, nil
}

// score is the toy scorer: the text is cut into segments at '.', '_', '-' and spaces; each segment earns the
// length of its longest common prefix with a word of the question and loses half a point per other letter.
func score(text []byte, words []string) float64 {
	total := 0.0
	for _, seg := range strings.FieldsFunc(strings.ToLower(string(text)), isSep) {
		best := 0
		for _, w := range words {
			if l := lcp(seg, w); l > best {
				best = l
			}
		}
		total += float64(best) - 0.5*float64(len(seg)-best)
	}
	return total
}

func isSep(r rune) bool { return r == '.' || r == '_' || r == '-' || unicode.IsSpace(r) }

func lcp(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

var stopwords = map[string]bool{"which": true, "what": true, "tool": true, "the": true, "reply": true,
	"with": true, "name": true, "only": true, "service": true, "verb": true, "object": true, "for": true,
	"and": true, "that": true, "from": true, "into": true, "all": true}

// keywords are the lower-case words of the question, of three letters or more, without the stop words.
func keywords(q string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(w) >= 3 && !stopwords[w] {
			out = append(out, w)
		}
	}
	return out
}

func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
