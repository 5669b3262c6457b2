package trie

// #include <trie.h>
import "C"

import (
	"errors"
	"strconv"
)

// Status is the result code of a libtrie call (trie_status). The numbers are stable.
type Status int32

// The statuses of libtrie (trie.h: TRIE_OK, TRIE_ERR_*).
const (
	StatusOK                    Status = C.TRIE_OK
	StatusNullArgument          Status = C.TRIE_ERR_NULL_ARGUMENT
	StatusInvalidArgument       Status = C.TRIE_ERR_INVALID_ARGUMENT
	StatusIO                    Status = C.TRIE_ERR_IO
	StatusUnsupportedVocabulary Status = C.TRIE_ERR_UNSUPPORTED_VOCABULARY
	StatusUnreachableString     Status = C.TRIE_ERR_UNREACHABLE_STRING
	StatusBufferTooSmall        Status = C.TRIE_ERR_BUFFER_TOO_SMALL
	StatusTokenRejected         Status = C.TRIE_ERR_TOKEN_REJECTED
	StatusPanic                 Status = C.TRIE_ERR_PANIC
	StatusMalformedFile         Status = C.TRIE_ERR_MALFORMED_FILE
	StatusEmptySet              Status = C.TRIE_ERR_EMPTY_SET
	StatusLimitExceeded         Status = C.TRIE_ERR_LIMIT_EXCEEDED
	StatusInvalidState          Status = C.TRIE_ERR_INVALID_STATE
	StatusVocabMismatch         Status = C.TRIE_ERR_VOCAB_MISMATCH
)

// String is libtrie's short description of the status, such as "token rejected".
func (s Status) String() string {
	return C.GoString(C.trie_status_str(C.int(s)))
}

// Error is a failed libtrie call: its status and the library's message (trie_last_error, read on the OS thread
// of the failing call).
//
// Compare with the sentinels using errors.Is, which matches on the status alone:
//
//	if errors.Is(err, trie.ErrTokenRejected) { ... }
//
// or get the details with errors.As:
//
//	var e *trie.Error
//	if errors.As(err, &e) { log.Print(e.Status, e.Message) }
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "trie: " + e.Status.String()
	}
	return "trie: " + e.Status.String() + ": " + e.Message
}

// Is reports whether target is an *Error of the same status (a target with a Message must match it too), so
// that errors.Is(err, trie.ErrTokenRejected) works for any message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status && (t.Message == "" || t.Message == e.Message)
}

// Sentinel errors, one per status, for errors.Is.
var (
	ErrNullArgument          error = &Error{Status: StatusNullArgument}
	ErrInvalidArgument       error = &Error{Status: StatusInvalidArgument}
	ErrIO                    error = &Error{Status: StatusIO}
	ErrUnsupportedVocabulary error = &Error{Status: StatusUnsupportedVocabulary}
	ErrUnreachableString     error = &Error{Status: StatusUnreachableString}
	ErrBufferTooSmall        error = &Error{Status: StatusBufferTooSmall}
	ErrTokenRejected         error = &Error{Status: StatusTokenRejected}
	ErrPanic                 error = &Error{Status: StatusPanic}
	ErrMalformedFile         error = &Error{Status: StatusMalformedFile}
	ErrEmptySet              error = &Error{Status: StatusEmptySet}
	ErrLimitExceeded         error = &Error{Status: StatusLimitExceeded}
	ErrInvalidState          error = &Error{Status: StatusInvalidState}
	ErrVocabMismatch         error = &Error{Status: StatusVocabMismatch}
)

// ErrClosed is returned by the methods of a Vocab or Automaton after Close.
var ErrClosed = errors.New("trie: use of a closed handle")

// errorf builds an *Error with a message made on the Go side (never from trie_last_error).
func errorf(s Status, msg string) error { return &Error{Status: s, Message: msg} }

func itoa(i int) string { return strconv.Itoa(i) }
