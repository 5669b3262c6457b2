package trie_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	trie "github.com/libtrie/libtrie/bindings/go"
)

// Real vocabularies: $TRIE_ASSETS/vocab/*.gguf, else <repo>/../shared/assets. Missing assets skip the tests
// that need them, unless TRIE_REQUIRE_ASSETS=1 (CI) makes that a failure.
func assetsDir(t testing.TB) string {
	dir := os.Getenv("TRIE_ASSETS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "assets")
	}
	if _, err := os.Stat(filepath.Join(dir, "vocab")); err != nil {
		if os.Getenv("TRIE_REQUIRE_ASSETS") == "1" {
			t.Fatalf("no vocabularies under %s (set TRIE_ASSETS): %v", dir, err)
		}
		t.Skipf("no vocabularies under %s (set TRIE_ASSETS)", dir)
	}
	return dir
}

func loadVocab(t testing.TB, name string) *trie.Vocab {
	t.Helper()
	v, err := trie.LoadGGUF(filepath.Join(assetsDir(t), "vocab", name))
	if err != nil {
		t.Fatalf("LoadGGUF(%s): %v", name, err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// The tool names of the repository's data set (service.verb_object), the first n of them.
func tools(t testing.TB, n int) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "data", "tools.txt"))
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatal("tools: empty")
	}
	return out
}

// vocabTable is a copy of every token's bytes and the end-of-generation ids.
type vocabTable struct {
	bytes [][]byte
	eog   map[int32]bool
}

func tokenTable(t testing.TB, v *trie.Vocab) vocabTable {
	t.Helper()
	table := vocabTable{bytes: make([][]byte, v.NTokens()), eog: map[int32]bool{}}
	for i := range table.bytes {
		b, err := v.Token(int32(i))
		if err != nil {
			t.Fatalf("Token(%d): %v", i, err)
		}
		table.bytes[i] = b
	}
	eog, err := v.EOGIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range eog {
		table.eog[id] = true
	}
	return table
}

func maskHas(mask []uint32, token int32) bool { return mask[token/32]>>(uint(token)%32)&1 == 1 }

// step is what one decoding step observed.
type step struct {
	State   State
	Allowed uint64 // hash of Allowed(State)
	Mask    uint64 // hash of the bitmask of State
	Token   int32
}

type State = trie.State

func hashInt32s(xs []int32) uint64 {
	h := fnv.New64a()
	for _, x := range xs {
		h.Write([]byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)})
	}
	return h.Sum64()
}

func hashUint32s(xs []uint32) uint64 {
	h := fnv.New64a()
	for _, x := range xs {
		h.Write([]byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)})
	}
	return h.Sum64()
}

// walkTo decodes member: at every step the longest allowed token that continues it, then an end-of-generation
// token once the state accepts. It checks that Mask and Allowed agree and returns the steps.
func walkTo(a *trie.Automaton, table vocabTable, member string, mask []uint32) ([]step, error) {
	var steps []step
	var allowed []int32
	s := a.Start()
	pos := 0
	for s != trie.StateFinished {
		var err error
		if allowed, err = a.AppendAllowed(allowed[:0], s); err != nil {
			return nil, err
		}
		if err := a.Mask(s, mask); err != nil {
			return nil, err
		}
		n := 0
		for _, w := range mask {
			for ; w != 0; w &= w - 1 {
				n++
			}
		}
		if n != len(allowed) {
			return nil, fmt.Errorf("state %d: mask has %d bits, Allowed %d tokens", s, n, len(allowed))
		}
		best, bestLen := int32(-1), -1
		for _, tok := range allowed {
			if !maskHas(mask, tok) {
				return nil, fmt.Errorf("state %d: allowed token %d not in the mask", s, tok)
			}
			b := table.bytes[tok]
			if table.eog[tok] {
				if pos == len(member) && a.IsAccepting(s) && best < 0 {
					best, bestLen = tok, 0
				}
				continue
			}
			if len(b) > bestLen && len(b) > 0 && strings.HasPrefix(member[pos:], string(b)) {
				best, bestLen = tok, len(b)
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("state %d at byte %d of %q: no allowed token continues it", s, pos, member)
		}
		steps = append(steps, step{State: s, Allowed: hashInt32s(allowed), Mask: hashUint32s(mask), Token: best})
		next, err := a.Advance(s, best)
		if err != nil {
			return nil, fmt.Errorf("Advance(%d, %d): %w", s, best, err)
		}
		s = next
		pos += bestLen
	}
	if pos != len(member) {
		return nil, fmt.Errorf("finished at byte %d of %q", pos, member)
	}
	return steps, nil
}

func TestVersion(t *testing.T) {
	if got, want := trie.Version(), trie.HeaderVersion(); got != want {
		t.Fatalf("Version() = %q, header %q", got, want)
	}
	if got := trie.StatusTokenRejected.String(); got != "token rejected" {
		t.Fatalf("StatusTokenRejected.String() = %q", got)
	}
}

func TestLoadGGUF(t *testing.T) {
	for _, name := range []string{"ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-qwen2.gguf"} {
		t.Run(name, func(t *testing.T) {
			v := loadVocab(t, name)
			if v.NTokens() < 1000 {
				t.Fatalf("NTokens() = %d", v.NTokens())
			}
			eog, err := v.EOGIDs()
			if err != nil || len(eog) == 0 {
				t.Fatalf("EOGIDs() = %v, %v", eog, err)
			}
			if _, err := v.Token(int32(v.NTokens())); !errors.Is(err, trie.ErrInvalidArgument) {
				t.Fatalf("Token(n) error = %v, want ErrInvalidArgument", err)
			}
			t.Logf("%d tokens, %d EOG ids, %.1f MiB", v.NTokens(), len(eog), float64(v.MemoryUsage())/(1<<20))
		})
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := trie.LoadGGUF(filepath.Join(t.TempDir(), "missing.gguf"))
	var e *trie.Error
	if !errors.Is(err, trie.ErrIO) || !errors.As(err, &e) || e.Message == "" {
		t.Fatalf("missing file: %v, want ErrIO with a message", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00truncated"), 0o644)
	if _, err := trie.LoadGGUF(bad); !errors.Is(err, trie.ErrMalformedFile) {
		t.Fatalf("truncated file: %v, want ErrMalformedFile", err)
	}
}

func TestWalkToMember(t *testing.T) {
	members := tools(t, 4000)
	for _, name := range []string{"ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"} {
		t.Run(name, func(t *testing.T) {
			v := loadVocab(t, name)
			a, err := v.Compile(members, nil)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			defer a.Close()
			if a.NMembers() != len(members) || a.NVocab() != v.NTokens() || a.MaskWords() != (v.NTokens()+31)/32 {
				t.Fatalf("NMembers %d NVocab %d MaskWords %d", a.NMembers(), a.NVocab(), a.MaskWords())
			}
			table := tokenTable(t, v)
			mask := a.NewMask()
			for _, m := range []string{members[0], members[len(members)/2], members[len(members)-1], "github.create_issue"} {
				steps, err := walkTo(a, table, m, mask)
				if err != nil {
					t.Fatal(err)
				}
				if last := steps[len(steps)-1]; !a.IsAccepting(last.State) {
					t.Fatalf("%q: the state before EOG does not accept", m)
				}
				t.Logf("%q: %d tokens + EOG", m, len(steps)-1)
			}
			// A prefix of a member is not a member: no end of generation there.
			if f, err := a.Forced(a.Start()); err != nil || f != nil {
				t.Fatalf("Forced(start) = %v, %v; want nil (several members)", f, err)
			}
		})
	}
}

func TestForced(t *testing.T) {
	v := loadVocab(t, "ggml-vocab-llama-bpe.gguf")
	a, err := v.Compile([]string{"github.create_issue", "github.close_issue", "slack.send_message"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	table := tokenTable(t, v)
	steps, err := walkTo(a, table, "slack.send_message", a.NewMask())
	if err != nil {
		t.Fatal(err)
	}
	// After the first token of "slack..." a single member is left.
	f, err := a.Forced(steps[1].State)
	if err != nil || f == nil {
		t.Fatalf("Forced = %v, %v", f, err)
	}
	var spelled []byte
	for _, tok := range f.Tokens {
		spelled = append(spelled, table.bytes[tok]...)
	}
	if !bytes.Equal(spelled, f.Bytes) || !strings.HasSuffix("slack.send_message", string(f.Bytes)) || len(f.Bytes) == 0 {
		t.Fatalf("Forced: bytes %q, tokens spell %q", f.Bytes, spelled)
	}
	// Following the forced tokens reaches an accepting state where nothing is left to force.
	s := steps[1].State
	for _, tok := range f.Tokens {
		if s, err = a.Advance(s, tok); err != nil {
			t.Fatal(err)
		}
	}
	if !a.IsAccepting(s) {
		t.Fatal("not accepting after the forced tokens")
	}
	if f, err := a.Forced(s); err != nil || f == nil || len(f.Bytes) != 0 || len(f.Tokens) != 0 {
		t.Fatalf("Forced(complete) = %+v, %v", f, err)
	}
	if f, err := a.Forced(trie.StateFinished); err != nil || f != nil {
		t.Fatalf("Forced(finished) = %+v, %v", f, err)
	}
}

func TestRejectedToken(t *testing.T) {
	v := loadVocab(t, "ggml-vocab-llama-bpe.gguf")
	a, err := v.Compile([]string{"github.create_issue", "slack.send_message"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := a.Start()
	allowed := a.Allowed(s)
	if len(allowed) == 0 {
		t.Fatal("nothing allowed at the start")
	}
	rejected := int32(0)
	for i := 0; i < len(allowed) && allowed[i] == rejected; i++ {
		rejected++
	}
	next, err := a.Advance(s, rejected)
	var e *trie.Error
	if !errors.Is(err, trie.ErrTokenRejected) || !errors.As(err, &e) {
		t.Fatalf("Advance(start, %d) = %v, want ErrTokenRejected", rejected, err)
	}
	if e.Status != trie.StatusTokenRejected || e.Message == "" || next != s {
		t.Fatalf("error %+v, state %d", e, next)
	}
	if errors.Is(err, trie.ErrInvalidState) {
		t.Fatal("a rejected token matches ErrInvalidState")
	}
	t.Logf("%v", err)
	if _, err := a.Advance(s, -1); !errors.Is(err, trie.ErrInvalidArgument) {
		t.Fatalf("Advance(token -1) = %v, want ErrInvalidArgument", err)
	}
	if _, err := a.Advance(s, int32(a.NVocab())); !errors.Is(err, trie.ErrInvalidArgument) {
		t.Fatalf("Advance(token n) = %v, want ErrInvalidArgument", err)
	}
	if _, err := a.Advance(State(a.NStates()), allowed[0]); !errors.Is(err, trie.ErrInvalidState) {
		t.Fatalf("Advance(bad state) = %v, want ErrInvalidState", err)
	}
	if a.Allowed(State(a.NStates())) != nil || a.IsAccepting(State(a.NStates())) {
		t.Fatal("bad state: Allowed not nil or accepting")
	}
	if _, err := a.AppendAllowed(nil, State(a.NStates())); !errors.Is(err, trie.ErrInvalidState) {
		t.Fatalf("AppendAllowed(bad state) = %v", err)
	}
	// In the finished state only end-of-generation tokens are allowed, and they keep it there.
	eog, _ := v.EOGIDs()
	if got := a.Allowed(trie.StateFinished); fmt.Sprint(got) != fmt.Sprint(eog) {
		t.Fatalf("Allowed(finished) = %v, want %v", got, eog)
	}
	if s2, err := a.Advance(trie.StateFinished, eog[0]); err != nil || s2 != trie.StateFinished {
		t.Fatalf("Advance(finished, eog) = %d, %v", s2, err)
	}
	if _, err := a.Advance(trie.StateFinished, allowed[0]); !errors.Is(err, trie.ErrTokenRejected) {
		t.Fatalf("Advance(finished, text token) = %v", err)
	}
}

func TestMaskBufferTooShort(t *testing.T) {
	v := loadVocab(t, "ggml-vocab-llama-spm.gguf")
	a, err := v.Compile([]string{"github.create_issue", "slack.send_message"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	short := make([]uint32, a.MaskWords()-1)
	for i := range short {
		short[i] = 0xdeadbeef
	}
	if err := a.Mask(a.Start(), short); !errors.Is(err, trie.ErrBufferTooSmall) {
		t.Fatalf("Mask(short) = %v, want ErrBufferTooSmall", err)
	}
	for i, w := range short {
		if w != 0xdeadbeef {
			t.Fatalf("word %d written on error", i)
		}
	}
	if err := a.Mask(a.Start(), nil); !errors.Is(err, trie.ErrBufferTooSmall) {
		t.Fatalf("Mask(nil) = %v, want ErrBufferTooSmall", err)
	}
	// A longer buffer is fine: every word is written, bits past the vocabulary are 0.
	long := make([]uint32, a.MaskWords()+3)
	for i := range long {
		long[i] = 0xffffffff
	}
	if err := a.Mask(a.Start(), long); err != nil {
		t.Fatal(err)
	}
	for i := a.MaskWords(); i < len(long); i++ {
		if long[i] != 0 {
			t.Fatalf("word %d past the vocabulary = %#x", i, long[i])
		}
	}
	// Batch: short buffer, then rows compared with single masks.
	states := []State{a.Start(), trie.StateFinished}
	if err := a.MaskBatch(states, make([]uint32, 2*a.MaskWords()-1), 0); !errors.Is(err, trie.ErrBufferTooSmall) {
		t.Fatalf("MaskBatch(short) = %v", err)
	}
	rows := make([]uint32, 2*a.MaskWords())
	if err := a.MaskBatch(states, rows, 0); err != nil {
		t.Fatal(err)
	}
	for i, s := range states {
		one := a.NewMask()
		a.Mask(s, one)
		if hashUint32s(one) != hashUint32s(rows[i*a.MaskWords():(i+1)*a.MaskWords()]) {
			t.Fatalf("MaskBatch row %d differs from Mask", i)
		}
	}
}

func TestMaskRowsMixesSets(t *testing.T) {
	v := loadVocab(t, "ggml-vocab-qwen2.gguf")
	a, err := v.Compile(tools(t, 300), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := v.Compile([]string{"東京", "大阪", "año"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sb, err := b.Advance(b.Start(), b.Allowed(b.Start())[0])
	if err != nil {
		t.Fatal(err)
	}
	rows := []trie.Row{{Automaton: a, State: a.Start()}, {Automaton: b, State: sb}, {Automaton: nil, State: 7},
		{Automaton: b, State: trie.StateFinished}}
	w := a.MaskWords()
	mask := make([]uint32, len(rows)*w)
	if err := trie.MaskRows(rows, mask, 0); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		got := mask[i*w : (i+1)*w]
		if r.Automaton == nil {
			for _, word := range got {
				if word != ^uint32(0) {
					t.Fatalf("unconstrained row %d is not all ones", i)
				}
			}
			continue
		}
		one := r.Automaton.NewMask()
		r.Automaton.Mask(r.State, one)
		if hashUint32s(one) != hashUint32s(got) {
			t.Fatalf("MaskRows row %d differs from Mask", i)
		}
	}
	bad := []trie.Row{{Automaton: a, State: 0}, {Automaton: b, State: 999999}}
	if err := trie.MaskRows(bad, mask, 0); !errors.Is(err, trie.ErrInvalidState) || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("MaskRows(bad state) = %v", err)
	}
	if err := trie.MaskRows(rows, mask[:len(mask)-1], 0); !errors.Is(err, trie.ErrBufferTooSmall) {
		t.Fatalf("MaskRows(short) = %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	members := tools(t, 4000)
	v := loadVocab(t, "ggml-vocab-llama-bpe.gguf")
	a, err := v.Compile(members, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	table := tokenTable(t, v)
	sample := make([]string, 0, 200)
	for i := 0; i < len(members); i += len(members) / 200 {
		sample = append(sample, members[i])
	}
	// Reference, one goroutine: the steps of every walk, and the message of a rejected token per member.
	want := make(map[string][]step, len(sample))
	wantMsg := make(map[string]string, len(sample))
	mask := a.NewMask()
	for _, m := range sample {
		steps, err := walkTo(a, table, m, mask)
		if err != nil {
			t.Fatal(err)
		}
		want[m] = steps
		_, err = a.Advance(steps[1].State, rejectedAt(a, steps[1].State))
		wantMsg[m] = err.Error()
	}

	workers := 4 * runtime.GOMAXPROCS(0)
	if workers < 16 {
		workers = 16
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			order := append([]string(nil), sample...)
			rand.New(rand.NewSource(seed)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			mask := a.NewMask()
			for _, m := range order {
				steps, err := walkTo(a, table, m, mask)
				if err != nil {
					errs <- err
					return
				}
				if fmt.Sprint(steps) != fmt.Sprint(want[m]) {
					errs <- fmt.Errorf("%q: steps differ from the single-goroutine walk", m)
					return
				}
				// Each failing call's message must be its own, whatever thread the goroutine runs on.
				_, err = a.Advance(steps[1].State, rejectedAt(a, steps[1].State))
				if err == nil || err.Error() != wantMsg[m] {
					errs <- fmt.Errorf("%q: rejected-token error %v, want %s", m, err, wantMsg[m])
					return
				}
				runtime.Gosched()
			}
		}(int64(w))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d goroutines x %d walks agree with the single-goroutine walks", workers, len(sample))
}

// rejectedAt is the smallest token id not allowed in s.
func rejectedAt(a *trie.Automaton, s State) int32 {
	allowed := a.Allowed(s)
	sort.Slice(allowed, func(i, j int) bool { return allowed[i] < allowed[j] })
	r := int32(0)
	for _, t := range allowed {
		if t == r {
			r++
		}
	}
	return r
}

func TestCompileErrorsAndDropped(t *testing.T) {
	// A hand-made vocabulary: no token spells "z".
	v, err := trie.NewVocab(trie.VocabSpec{
		Tokens: [][]byte{[]byte("</s>"), []byte("a"), []byte("b"), []byte("ab")},
		Kinds:  []trie.TokenKind{trie.TokenControl, trie.TokenNormal, trie.TokenNormal, trie.TokenNormal},
		EOGIDs: []int32{0},
		NVocab: 40,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.NTokens() != 40 {
		t.Fatalf("NTokens = %d, want the padded 40", v.NTokens())
	}
	if _, err := v.Compile(nil, nil); !errors.Is(err, trie.ErrEmptySet) {
		t.Fatalf("Compile(empty) = %v", err)
	}
	if _, err := v.Compile([]string{"ab", "az"}, nil); !errors.Is(err, trie.ErrUnreachableString) {
		t.Fatalf("Compile(unreachable) = %v", err)
	}
	a, err := v.CompileBytes([][]byte{[]byte("ab"), []byte("az"), []byte("ba")}, &trie.CompileOptions{DropUnreachable: true})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := a.Dropped(); err != nil || fmt.Sprint(d) != "[1]" {
		t.Fatalf("Dropped = %v, %v", d, err)
	}
	if got := a.Allowed(a.Start()); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("Allowed(start) = %v", got)
	}
	v2, err := a.Vocab()
	if err != nil || v2.NTokens() != 40 {
		t.Fatalf("Vocab() = %v, %v", v2, err)
	}
	v2.Close()
	// Close is idempotent; a closed handle reports ErrClosed.
	a.Close()
	a.Close()
	if _, err := a.Advance(0, 1); !errors.Is(err, trie.ErrClosed) {
		t.Fatalf("Advance after Close = %v", err)
	}
	if err := a.Mask(0, make([]uint32, 2)); !errors.Is(err, trie.ErrClosed) {
		t.Fatalf("Mask after Close = %v", err)
	}
	if a.Allowed(0) != nil || a.IsAccepting(0) || a.NStates() != 0 {
		t.Fatal("closed automaton still answers")
	}
	if _, err := trie.NewVocab(trie.VocabSpec{Tokens: [][]byte{[]byte("a")}, Kinds: []trie.TokenKind{}}); !errors.Is(err, trie.ErrInvalidArgument) {
		t.Fatalf("NewVocab(bad kinds) = %v", err)
	}
}

// The finalizers free handles that are dropped without Close.
func TestFinalizers(t *testing.T) {
	for i := 0; i < 100; i++ {
		v, err := trie.NewVocab(trie.VocabSpec{Tokens: [][]byte{[]byte("</s>"), []byte("x")}, EOGIDs: []int32{0}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Compile([]string{"x", "xx"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
}

func TestLoadTokenizerJSON(t *testing.T) {
	path := filepath.Join(assetsDir(t), "tokenizers", "qwen3.tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s", path)
	}
	v, err := trie.LoadTokenizerJSON(path, nil)
	if err != nil {
		if errors.Is(err, trie.ErrUnsupportedVocabulary) {
			t.Skipf("libtrie built without tokenizer.json support: %v", err)
		}
		t.Fatal(err)
	}
	defer v.Close()
	eog, err := v.EOGIDs()
	if err != nil || len(eog) == 0 {
		t.Fatalf("inferred EOGIDs = %v, %v", eog, err)
	}
	// Explicit options: no end-of-generation ids at all, and Qwen3's padded mask width.
	v2, err := trie.LoadTokenizerJSON(path, &trie.TokenizerJSONOptions{EOGIDs: []int32{}, NVocab: 151936})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if eog2, _ := v2.EOGIDs(); len(eog2) != 0 || v2.NTokens() != 151936 {
		t.Fatalf("EOGIDs %v, NTokens %d", eog2, v2.NTokens())
	}
	// The GGUF and tokenizer.json of the same model spell the same tokens.
	g := loadVocab(t, "ggml-vocab-qwen2.gguf")
	for _, id := range []int32{0, 100, 1000, 50000} {
		a, _ := v.Token(id)
		b, _ := g.Token(id)
		if !bytes.Equal(a, b) {
			t.Fatalf("token %d: tokenizer.json %q, GGUF %q", id, a, b)
		}
	}
	t.Logf("qwen3 tokenizer.json: %d tokens, EOG %v", v.NTokens(), eog)
}
