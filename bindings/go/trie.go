// Package trie is the Go binding of libtrie: it forces a language model to output exactly one string of a
// large finite set.
//
// A set of strings is compiled against a tokenizer vocabulary into an immutable Automaton. Decoding keeps a
// plain integer State per sequence:
//
//	vocab, err := trie.LoadGGUF("model.gguf")
//	...
//	defer vocab.Close()
//	a, err := vocab.Compile([]string{"github.create_issue", "slack.send_message"}, nil)
//	...
//	defer a.Close()
//	mask := a.NewMask()
//	s := a.Start()
//	for s != trie.StateFinished {
//		a.Mask(s, mask)              // apply to the logits, sample token t
//		s, err = a.Advance(s, t)     // ErrTokenRejected if t is not allowed
//	}
//
// Vocab and Automaton are safe for concurrent use by any number of goroutines (the C library is lock-free
// and immutable once built), except Close, which must not run while other calls on the same handle are in
// progress. Close frees the C memory at once; a finalizer frees handles that are dropped without Close.
//
// Errors are *Error values carrying the library's Status and message; compare them with errors.Is and the Err*
// sentinels. The message is copied inside the same C call that failed, so it always belongs to that call even
// when goroutines move between OS threads (trie_last_error is per OS thread).
package trie

/*
#include <stdlib.h>
#include <string.h>
#include <trie.h>

// Each fallible call is wrapped so that the thread-local message of a failure is read (and copied) by the same
// C call, on the same OS thread: a goroutine may move to another thread between two cgo calls. On failure
// *err is a malloc'd copy of trie_last_error() that Go frees; on success it is NULL.
static char *gotrie_err(trie_status st) { return st == TRIE_OK ? NULL : strdup(trie_last_error()); }

static trie_status gotrie_vocab_from_gguf(const char *path, trie_vocab **out, char **err) {
	trie_status st = trie_vocab_from_gguf(path, out); *err = gotrie_err(st); return st;
}
static trie_status gotrie_vocab_from_tokenizer_json_ex(const char *path, const int32_t *eog, size_t n_eog,
		size_t n_vocab, trie_vocab **out, char **err) {
	trie_status st = trie_vocab_from_tokenizer_json_ex(path, eog, n_eog, n_vocab, out); *err = gotrie_err(st); return st;
}
static trie_status gotrie_vocab_new_ex(const uint8_t *const *bytes, const size_t *lens, const uint32_t *kinds,
		size_t n, const int32_t *eog, size_t n_eog, size_t n_vocab, trie_vocab **out, char **err) {
	trie_status st = trie_vocab_new_ex(bytes, lens, kinds, n, eog, n_eog, n_vocab, out); *err = gotrie_err(st); return st;
}
static trie_status gotrie_vocab_token(const trie_vocab *v, int32_t t, const uint8_t **bytes, size_t *len, char **err) {
	trie_status st = trie_vocab_token(v, t, bytes, len); *err = gotrie_err(st); return st;
}
static trie_status gotrie_vocab_eog_ids(const trie_vocab *v, const int32_t **ids, size_t *n, char **err) {
	trie_status st = trie_vocab_eog_ids(v, ids, n); *err = gotrie_err(st); return st;
}
static trie_status gotrie_compile(const trie_vocab *v, const uint8_t *const *strings, const size_t *lens, size_t n,
		bool drop_unreachable, trie_automaton **out, char **err) {
	trie_options o; trie_options_init(&o); o.drop_unreachable = drop_unreachable;
	trie_status st = trie_compile(v, strings, lens, n, &o, out); *err = gotrie_err(st); return st;
}
static trie_status gotrie_dropped(const trie_automaton *a, const size_t **idx, size_t *n, char **err) {
	trie_status st = trie_automaton_dropped(a, idx, n); *err = gotrie_err(st); return st;
}
static trie_status gotrie_allowed(const trie_automaton *a, trie_state s, const int32_t **t, size_t *n, char **err) {
	trie_status st = trie_allowed(a, s, t, n); *err = gotrie_err(st); return st;
}
static trie_status gotrie_mask(const trie_automaton *a, trie_state s, uint32_t *m, size_t n, char **err) {
	trie_status st = trie_mask(a, s, m, n); *err = gotrie_err(st); return st;
}
static trie_status gotrie_mask_batch(const trie_automaton *a, const trie_state *s, size_t n_s, uint32_t *m,
		size_t n_words, size_t row_words, char **err) {
	trie_status st = trie_mask_batch(a, s, n_s, m, n_words, row_words); *err = gotrie_err(st); return st;
}
static trie_status gotrie_mask_rows(const trie_automaton *const *a, const trie_state *s, size_t n_rows, uint32_t *m,
		size_t n_words, size_t row_words, char **err) {
	trie_status st = trie_mask_rows(a, s, n_rows, m, n_words, row_words); *err = gotrie_err(st); return st;
}
static trie_status gotrie_advance(const trie_automaton *a, trie_state s, int32_t t, trie_state *next, char **err) {
	trie_status st = trie_advance(a, s, t, next); *err = gotrie_err(st); return st;
}
static trie_status gotrie_forced(const trie_automaton *a, trie_state s, uint8_t *bytes, size_t bytes_cap,
		size_t *n_bytes, int32_t *tokens, size_t tokens_cap, size_t *n_tokens, bool *is_forced, char **err) {
	trie_status st = trie_forced(a, s, bytes, bytes_cap, n_bytes, tokens, tokens_cap, n_tokens, is_forced);
	*err = gotrie_err(st); return st;
}
*/
import "C"

import (
	"math"
	"runtime"
	"unsafe"
)

// State is a decoding state: a plain integer, one per sequence, meaningful only with the Automaton that made
// it. The start state is 0.
type State uint32

// StateFinished is the state after an end-of-generation token: the member is complete. Only
// end-of-generation tokens are allowed there, and they keep it there.
const StateFinished State = math.MaxUint32

// TokenKind is the kind of a token for NewVocab (GGUF's tokenizer.ggml.token_type).
type TokenKind uint32

// Token kinds (trie.h: TRIE_TOKEN_*). 0 also means normal.
const (
	TokenNormal      TokenKind = C.TRIE_TOKEN_NORMAL
	TokenUnknown     TokenKind = C.TRIE_TOKEN_UNKNOWN
	TokenControl     TokenKind = C.TRIE_TOKEN_CONTROL
	TokenUserDefined TokenKind = C.TRIE_TOKEN_USER_DEFINED
	TokenUnused      TokenKind = C.TRIE_TOKEN_UNUSED
	TokenByte        TokenKind = C.TRIE_TOKEN_BYTE
)

// The version of trie.h this package was compiled against.
const (
	HeaderVersionMajor = C.TRIE_VERSION_MAJOR
	HeaderVersionMinor = C.TRIE_VERSION_MINOR
	HeaderVersionPatch = C.TRIE_VERSION_PATCH
)

// Version is the version of the linked libtrie, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.trie_version()) }

// HeaderVersion is the version of trie.h this package was compiled against, "MAJOR.MINOR.PATCH".
func HeaderVersion() string {
	return itoa(HeaderVersionMajor) + "." + itoa(HeaderVersionMinor) + "." + itoa(HeaderVersionPatch)
}

// check turns a status and the message copied by the C wrapper into an error, freeing the copy.
func check(st C.trie_status, msg *C.char) error {
	if st == C.TRIE_OK {
		return nil
	}
	m := ""
	if msg != nil {
		m = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return &Error{Status: Status(st), Message: m}
}

// ---------------------------------------------------------------------------------------------------------------
// Vocab

// Vocab is a tokenizer vocabulary. It is immutable and safe for concurrent use. Release it with Close (a
// finalizer is only a safety net); automata compiled from it keep their own reference, so it may be closed
// right after compiling.
type Vocab struct {
	ptr *C.trie_vocab
}

func newVocab(p *C.trie_vocab) *Vocab {
	v := &Vocab{ptr: p}
	runtime.SetFinalizer(v, (*Vocab).Close)
	return v
}

// LoadGGUF reads the tokenizer of a GGUF file (a model or a vocab-only file; only the metadata is read).
func LoadGGUF(path string) (*Vocab, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var p *C.trie_vocab
	var msg *C.char
	if err := check(C.gotrie_vocab_from_gguf(cpath, &p, &msg), msg); err != nil {
		return nil, err
	}
	return newVocab(p), nil
}

// TokenizerJSONOptions are the options of LoadTokenizerJSON.
type TokenizerJSONOptions struct {
	// EOGIDs are the end-of-generation token ids (e.g. eos_token_id of generation_config.json). nil: inferred
	// from the added tokens' names; an empty non-nil slice: none.
	EOGIDs []int32
	// NVocab is the mask width: the model's padded vocabulary size (0: the largest id + 1).
	NVocab int
}

// LoadTokenizerJSON reads a Hugging Face tokenizer.json. opts may be nil (end-of-generation ids inferred, mask
// width the largest id + 1). A libtrie built without tokenizer.json support gives ErrUnsupportedVocabulary.
func LoadTokenizerJSON(path string, opts *TokenizerJSONOptions) (*Vocab, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var eog *C.int32_t
	var nEOG, nVocab C.size_t
	var eogC unsafe.Pointer
	if opts != nil {
		if opts.NVocab < 0 {
			return nil, errorf(StatusInvalidArgument, "NVocab is negative")
		}
		nVocab = C.size_t(opts.NVocab)
		if opts.EOGIDs != nil {
			// A C copy: a non-NULL pointer even for an empty list ("none", not "infer").
			eogC = C.malloc(C.size_t(len(opts.EOGIDs))*4 + 4)
			defer C.free(eogC)
			copy(unsafe.Slice((*int32)(eogC), len(opts.EOGIDs)), opts.EOGIDs)
			eog = (*C.int32_t)(eogC)
			nEOG = C.size_t(len(opts.EOGIDs))
		}
	}
	var p *C.trie_vocab
	var msg *C.char
	if err := check(C.gotrie_vocab_from_tokenizer_json_ex(cpath, eog, nEOG, nVocab, &p, &msg), msg); err != nil {
		return nil, err
	}
	return newVocab(p), nil
}

// VocabSpec describes a vocabulary for NewVocab.
type VocabSpec struct {
	// Tokens are the bytes of every token id 0..len(Tokens)-1 (nil or empty for none).
	Tokens [][]byte
	// Kinds are the token kinds, one per token; nil: all normal.
	Kinds []TokenKind
	// EOGIDs are the end-of-generation token ids.
	EOGIDs []int32
	// NVocab is the mask width when the model's vocabulary is larger than Tokens (padding); 0: len(Tokens).
	NVocab int
}

// NewVocab builds a vocabulary from token bytes (they are copied).
func NewVocab(spec VocabSpec) (*Vocab, error) {
	n := len(spec.Tokens)
	if spec.Kinds != nil && len(spec.Kinds) != n {
		return nil, errorf(StatusInvalidArgument, "len(Kinds) = "+itoa(len(spec.Kinds))+", want len(Tokens) = "+itoa(n))
	}
	if spec.NVocab < 0 {
		return nil, errorf(StatusInvalidArgument, "NVocab is negative")
	}
	arr := newCBytesArray(n, func(i int) int { return len(spec.Tokens[i]) }, func(i int, dst []byte) { copy(dst, spec.Tokens[i]) })
	defer arr.free()
	var kinds *C.uint32_t
	if n > 0 && spec.Kinds != nil {
		kinds = (*C.uint32_t)(unsafe.Pointer(&spec.Kinds[0])) // []TokenKind holds no Go pointers
	}
	var eog *C.int32_t
	if len(spec.EOGIDs) > 0 {
		eog = (*C.int32_t)(unsafe.Pointer(&spec.EOGIDs[0]))
	}
	var p *C.trie_vocab
	var msg *C.char
	st := C.gotrie_vocab_new_ex(arr.ptrs, arr.lens, kinds, C.size_t(n), eog, C.size_t(len(spec.EOGIDs)),
		C.size_t(spec.NVocab), &p, &msg)
	runtime.KeepAlive(spec.Kinds)
	runtime.KeepAlive(spec.EOGIDs)
	if err := check(st, msg); err != nil {
		return nil, err
	}
	return newVocab(p), nil
}

// Close releases the vocabulary (automata compiled from it keep it alive as long as they need it). It is
// idempotent; it must not run concurrently with other methods on v.
func (v *Vocab) Close() error {
	if v.ptr != nil {
		C.trie_vocab_free(v.ptr)
		v.ptr = nil
		runtime.SetFinalizer(v, nil)
	}
	return nil
}

// NTokens is the number of token ids, the mask width in bits (ids are 0..NTokens()-1). 0 after Close.
func (v *Vocab) NTokens() int {
	n := C.trie_vocab_n_tokens(v.ptr)
	runtime.KeepAlive(v)
	return int(n)
}

// MemoryUsage is the number of heap bytes held by the vocabulary.
func (v *Vocab) MemoryUsage() int {
	n := C.trie_vocab_memory_usage(v.ptr)
	runtime.KeepAlive(v)
	return int(n)
}

// Token returns a copy of the bytes token id stands for (empty for padding and control tokens).
func (v *Vocab) Token(id int32) ([]byte, error) {
	if v.ptr == nil {
		return nil, ErrClosed
	}
	var b *C.uint8_t
	var n C.size_t
	var msg *C.char
	st := C.gotrie_vocab_token(v.ptr, C.int32_t(id), &b, &n, &msg)
	var out []byte
	if st == C.TRIE_OK {
		out = C.GoBytes(unsafe.Pointer(b), C.int(n))
	}
	runtime.KeepAlive(v)
	return out, check(st, msg)
}

// EOGIDs returns a copy of the end-of-generation token ids, ascending.
func (v *Vocab) EOGIDs() ([]int32, error) {
	if v.ptr == nil {
		return nil, ErrClosed
	}
	var ids *C.int32_t
	var n C.size_t
	var msg *C.char
	st := C.gotrie_vocab_eog_ids(v.ptr, &ids, &n, &msg)
	var out []int32
	if st == C.TRIE_OK {
		out = copyInt32(ids, n)
	}
	runtime.KeepAlive(v)
	return out, check(st, msg)
}

// CompileOptions are the options of Compile; nil means the defaults.
type CompileOptions struct {
	// DropUnreachable drops the strings no token sequence can produce (see Automaton.Dropped) instead of
	// failing with ErrUnreachableString. Compiling still fails when no string is left.
	DropUnreachable bool
}

// Compile compiles a set of strings (duplicates, prefixes and the empty string allowed) against the vocabulary.
// Errors: ErrEmptySet, ErrUnreachableString (the message names the strings), ErrLimitExceeded.
func (v *Vocab) Compile(members []string, opts *CompileOptions) (*Automaton, error) {
	return compile(v, members, opts)
}

// CompileBytes is Compile for members given as arbitrary bytes.
func (v *Vocab) CompileBytes(members [][]byte, opts *CompileOptions) (*Automaton, error) {
	return compile(v, members, opts)
}

func compile[S ~string | ~[]byte](v *Vocab, members []S, opts *CompileOptions) (*Automaton, error) {
	if v.ptr == nil {
		return nil, ErrClosed
	}
	arr := newCBytesArray(len(members), func(i int) int { return len(members[i]) }, func(i int, dst []byte) { copy(dst, members[i]) })
	defer arr.free()
	drop := C.bool(opts != nil && opts.DropUnreachable)
	var p *C.trie_automaton
	var msg *C.char
	st := C.gotrie_compile(v.ptr, arr.ptrs, arr.lens, C.size_t(len(members)), drop, &p, &msg)
	runtime.KeepAlive(v)
	if err := check(st, msg); err != nil {
		return nil, err
	}
	return newAutomaton(p), nil
}

// ---------------------------------------------------------------------------------------------------------------
// Automaton

// Automaton is a set of strings compiled against a vocabulary. It is immutable and safe for concurrent use by
// any number of goroutines: decoding state lives in the caller's State values. Release it with Close (a
// finalizer is only a safety net).
type Automaton struct {
	ptr *C.trie_automaton
}

func newAutomaton(p *C.trie_automaton) *Automaton {
	a := &Automaton{ptr: p}
	runtime.SetFinalizer(a, (*Automaton).Close)
	return a
}

// Close releases the automaton. It is idempotent; it must not run concurrently with other methods on a.
func (a *Automaton) Close() error {
	if a.ptr != nil {
		C.trie_automaton_free(a.ptr)
		a.ptr = nil
		runtime.SetFinalizer(a, nil)
	}
	return nil
}

// Vocab returns a new reference to the automaton's vocabulary (Close it when done).
func (a *Automaton) Vocab() (*Vocab, error) {
	if a.ptr == nil {
		return nil, ErrClosed
	}
	p := C.trie_automaton_vocab(a.ptr)
	runtime.KeepAlive(a)
	return newVocab(p), nil
}

// Start is the start state (always 0).
func (a *Automaton) Start() State { return 0 }

// NVocab is the number of token ids of the vocabulary (the mask width in bits).
func (a *Automaton) NVocab() int {
	n := C.trie_automaton_n_vocab(a.ptr)
	runtime.KeepAlive(a)
	return int(n)
}

// MaskWords is the number of 32-bit words of one bitmask: (NVocab()+31)/32.
func (a *Automaton) MaskWords() int {
	n := C.trie_automaton_mask_words(a.ptr)
	runtime.KeepAlive(a)
	return int(n)
}

// NewMask allocates a bitmask buffer of MaskWords() words.
func (a *Automaton) NewMask() []uint32 { return make([]uint32, a.MaskWords()) }

// NStates is the number of states (valid states are 0..NStates()-1 and StateFinished).
func (a *Automaton) NStates() int {
	n := C.trie_automaton_n_states(a.ptr)
	runtime.KeepAlive(a)
	return int(n)
}

// NMembers is the number of distinct strings the automaton can produce.
func (a *Automaton) NMembers() int {
	n := C.trie_automaton_n_members(a.ptr)
	runtime.KeepAlive(a)
	return int(n)
}

// MemoryUsage is the number of heap bytes held by the automaton, not counting its vocabulary.
func (a *Automaton) MemoryUsage() int {
	n := C.trie_automaton_memory_usage(a.ptr)
	runtime.KeepAlive(a)
	return int(n)
}

// Dropped returns the indices (into the members given to Compile) of the strings dropped as unreachable with
// DropUnreachable, ascending.
func (a *Automaton) Dropped() ([]int, error) {
	if a.ptr == nil {
		return nil, ErrClosed
	}
	var idx *C.size_t
	var n C.size_t
	var msg *C.char
	st := C.gotrie_dropped(a.ptr, &idx, &n, &msg)
	var out []int
	if st == C.TRIE_OK && n > 0 {
		src := unsafe.Slice(idx, int(n))
		out = make([]int, len(src))
		for i, x := range src {
			out[i] = int(x)
		}
	}
	runtime.KeepAlive(a)
	return out, check(st, msg)
}

// Mask writes the bitmask of state into mask, which must hold at least MaskWords() words (else
// ErrBufferTooSmall, and nothing is written): token t is bit t%32 of word t/32, 1 = allowed. Every word of
// mask is written; bits past the vocabulary are 0.
func (a *Automaton) Mask(state State, mask []uint32) error {
	if a.ptr == nil {
		return ErrClosed
	}
	var msg *C.char
	st := C.gotrie_mask(a.ptr, C.trie_state(state), wordsPtr(mask), C.size_t(len(mask)), &msg)
	runtime.KeepAlive(a)
	return check(st, msg)
}

// MaskBatch fills one bitmask row per state: row i is mask[i*rowWords:(i+1)*rowWords], rowWords at least
// MaskWords() (0 means MaskWords()), len(mask) at least len(states)*rowWords. Large batches are filled in
// parallel. On any error nothing is written.
func (a *Automaton) MaskBatch(states []State, mask []uint32, rowWords int) error {
	if a.ptr == nil {
		return ErrClosed
	}
	if rowWords == 0 {
		rowWords = a.MaskWords()
	}
	if rowWords < 0 {
		return errorf(StatusInvalidArgument, "rowWords is negative")
	}
	var sp *C.trie_state
	if len(states) > 0 {
		sp = (*C.trie_state)(unsafe.Pointer(&states[0]))
	}
	var msg *C.char
	st := C.gotrie_mask_batch(a.ptr, sp, C.size_t(len(states)), wordsPtr(mask), C.size_t(len(mask)), C.size_t(rowWords), &msg)
	runtime.KeepAlive(a)
	return check(st, msg)
}

// Row is one sequence of a serving batch for MaskRows: the set it follows (nil: unconstrained) and its state.
type Row struct {
	Automaton *Automaton
	State     State
}

// MaskRows fills one bitmask row per sequence of a batch whose sequences follow different sets, in one call: row i
// is mask[i*rowWords:(i+1)*rowWords]; a nil Automaton gives a row of all ones. rowWords must be at least every
// automaton's MaskWords (0: the largest of them). Every row is checked first: on error (the message names the
// row) nothing is written. Large batches are filled in parallel.
func MaskRows(rows []Row, mask []uint32, rowWords int) error {
	if rowWords < 0 {
		return errorf(StatusInvalidArgument, "rowWords is negative")
	}
	if len(rows) == 0 {
		return nil
	}
	automata := make([]*C.trie_automaton, len(rows))
	states := make([]C.trie_state, len(rows))
	widest := 0
	for i, r := range rows {
		if r.Automaton != nil {
			if r.Automaton.ptr == nil {
				return ErrClosed
			}
			automata[i] = r.Automaton.ptr
			if w := r.Automaton.MaskWords(); w > widest {
				widest = w
			}
		}
		states[i] = C.trie_state(r.State)
	}
	if rowWords == 0 {
		rowWords = widest
	}
	var msg *C.char
	st := C.gotrie_mask_rows(&automata[0], &states[0], C.size_t(len(rows)), wordsPtr(mask), C.size_t(len(mask)),
		C.size_t(rowWords), &msg)
	runtime.KeepAlive(rows)
	return check(st, msg)
}

// Advance returns the state after token (StateFinished after an end-of-generation token). A token that is not
// allowed gives ErrTokenRejected, an id outside 0..NVocab()-1 ErrInvalidArgument, a bad state ErrInvalidState;
// on error the returned state is the given one, unchanged.
func (a *Automaton) Advance(state State, token int32) (State, error) {
	if a.ptr == nil {
		return state, ErrClosed
	}
	next := C.trie_state(state)
	var msg *C.char
	st := C.gotrie_advance(a.ptr, C.trie_state(state), C.int32_t(token), &next, &msg)
	runtime.KeepAlive(a)
	if err := check(st, msg); err != nil {
		return state, err
	}
	return State(next), nil
}

// Allowed returns a copy of the tokens allowed in state, ascending (the end-of-generation ids in
// StateFinished); nil for an invalid state or a closed automaton (AppendAllowed reports the error).
func (a *Automaton) Allowed(state State) []int32 {
	out, err := a.AppendAllowed(nil, state)
	if err != nil {
		return nil
	}
	return out
}

// AppendAllowed appends the tokens allowed in state, ascending, to dst and returns the extended slice: reuse
// dst across steps to decode without allocating.
func (a *Automaton) AppendAllowed(dst []int32, state State) ([]int32, error) {
	if a.ptr == nil {
		return dst, ErrClosed
	}
	var t *C.int32_t
	var n C.size_t
	var msg *C.char
	st := C.gotrie_allowed(a.ptr, C.trie_state(state), &t, &n, &msg)
	if st == C.TRIE_OK {
		if dst == nil {
			dst = make([]int32, 0, int(n))
		}
		if n > 0 {
			dst = append(dst, unsafe.Slice((*int32)(unsafe.Pointer(t)), int(n))...) // copied while a is alive
		}
	}
	runtime.KeepAlive(a)
	return dst, check(st, msg)
}

// IsAccepting reports whether a string of the set may end in state (end-of-generation tokens are allowed
// there). True for StateFinished; false for an invalid state.
func (a *Automaton) IsAccepting(state State) bool {
	r := C.trie_is_accepting(a.ptr, C.trie_state(state))
	runtime.KeepAlive(a)
	return bool(r)
}

// Forced is the forced continuation of a state: the rest of the only member left.
type Forced struct {
	// Bytes are the remaining bytes of the member (empty when it is complete).
	Bytes []byte
	// Tokens spell Bytes (longest tokens first), without an end-of-generation token.
	Tokens []int32
}

// Forced returns the forced continuation when exactly one string of the set remains below state; nil when
// several remain (or in StateFinished).
func (a *Automaton) Forced(state State) (*Forced, error) {
	if a.ptr == nil {
		return nil, ErrClosed
	}
	defer runtime.KeepAlive(a)
	var nBytes, nTokens C.size_t
	var isForced C.bool
	var msg *C.char
	st := C.gotrie_forced(a.ptr, C.trie_state(state), nil, 0, &nBytes, nil, 0, &nTokens, &isForced, &msg)
	if st != C.TRIE_OK && st != C.TRIE_ERR_BUFFER_TOO_SMALL {
		return nil, check(st, msg)
	}
	if msg != nil {
		C.free(unsafe.Pointer(msg))
	}
	if !bool(isForced) {
		return nil, nil
	}
	f := &Forced{Bytes: make([]byte, int(nBytes)), Tokens: make([]int32, int(nTokens))}
	if nBytes == 0 && nTokens == 0 {
		return f, nil
	}
	var bp *C.uint8_t
	if nBytes > 0 {
		bp = (*C.uint8_t)(unsafe.Pointer(&f.Bytes[0]))
	}
	var tp *C.int32_t
	if nTokens > 0 {
		tp = (*C.int32_t)(unsafe.Pointer(&f.Tokens[0]))
	}
	st = C.gotrie_forced(a.ptr, C.trie_state(state), bp, nBytes, &nBytes, tp, nTokens, &nTokens, &isForced, &msg)
	if err := check(st, msg); err != nil {
		return nil, err
	}
	f.Bytes, f.Tokens = f.Bytes[:int(nBytes)], f.Tokens[:int(nTokens)]
	return f, nil
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers

// cBytesArray is an array of byte strings in C memory (cgo may not pass Go memory holding Go pointers): one
// buffer with all the bytes, an array of pointers into it and an array of lengths.
type cBytesArray struct {
	buf  unsafe.Pointer
	ptrs **C.uint8_t
	lens *C.size_t
}

func newCBytesArray(n int, length func(int) int, fill func(int, []byte)) cBytesArray {
	if n == 0 {
		return cBytesArray{}
	}
	total := 0
	for i := 0; i < n; i++ {
		total += length(i)
	}
	var r cBytesArray
	r.buf = C.malloc(C.size_t(total + 1))
	r.ptrs = (**C.uint8_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	r.lens = (*C.size_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.size_t(0)))))
	if r.buf == nil || r.ptrs == nil || r.lens == nil {
		r.free()
		panic("trie: out of memory")
	}
	all := unsafe.Slice((*byte)(r.buf), total+1)
	ptrs := unsafe.Slice(r.ptrs, n)
	lens := unsafe.Slice(r.lens, n)
	off := 0
	for i := 0; i < n; i++ {
		l := length(i)
		fill(i, all[off:off+l])
		ptrs[i] = (*C.uint8_t)(unsafe.Add(r.buf, off))
		lens[i] = C.size_t(l)
		off += l
	}
	return r
}

func (r cBytesArray) free() {
	C.free(r.buf)
	C.free(unsafe.Pointer(r.ptrs))
	C.free(unsafe.Pointer(r.lens))
}

// wordsPtr points at the first word of mask; for an empty slice, at a dummy word, so that the library reports
// a buffer too small (0 words) rather than a NULL argument.
func wordsPtr(mask []uint32) *C.uint32_t {
	if len(mask) == 0 {
		return (*C.uint32_t)(unsafe.Pointer(&emptyWords[0]))
	}
	return (*C.uint32_t)(unsafe.Pointer(&mask[0]))
}

var emptyWords [1]uint32

func copyInt32(p *C.int32_t, n C.size_t) []int32 {
	out := make([]int32, int(n))
	if n > 0 {
		copy(out, unsafe.Slice((*int32)(unsafe.Pointer(p)), int(n)))
	}
	return out
}
