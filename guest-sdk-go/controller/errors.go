package controller

import (
	"errors"
	"fmt"
)

// ErrorCase is the kind of failure the host reports.
type ErrorCase uint8

// The codes of the contract's `error`, in its order.
const (
	NotFound ErrorCase = iota
	AlreadyExists
	Conflict
	Forbidden
	Invalid
	Unavailable
	Other
)

var caseNames = [...]string{"not-found", "already-exists", "conflict", "forbidden", "invalid", "unavailable", "other"}

// Cause is one field-level reason of a failure, as the API server gave it.
type Cause struct {
	// Field is the field path (`.spec.replicas`), Reason the server's reason
	// (`FieldValueInvalid`, `Conflict`), Message its words.
	Field, Reason, Message string
	// Manager is the field manager that owns the field, for apply conflicts.
	Manager *string
}

// Error is a failure of a cluster call, or a reconcile's own failure.
type Error struct {
	Case    ErrorCase
	Message string
	// Status is the API server's HTTP status; nil when the host refused the call
	// before making it.
	Status *uint16
	// RetryAfterMs is how long the server asked to wait (429, 503), if it said.
	RetryAfterMs *uint64
	// Causes are the server's field-level reasons (conflicting fields and their
	// managers, invalid fields).
	Causes []Cause
	// Terminal, on an error Reconcile returns, says retrying will not help: the host
	// records it and does not retry the key until something queues it again.
	Terminal bool
}

func (e *Error) Error() string {
	name := "unknown"
	if int(e.Case) < len(caseNames) {
		name = caseNames[e.Case]
	}
	return fmt.Sprintf("%s: %s", name, e.Message)
}

// NewError is a reconcile's own failure with a case and a message.
func NewError(c ErrorCase, format string, args ...any) *Error {
	return &Error{Case: c, Message: fmt.Sprintf(format, args...)}
}

// Terminal is err marked terminal (as controller-runtime's reconcile.TerminalError):
// returned from Reconcile, the host records it and does not retry the key until it
// is queued again by a change. An error that is not an *Error becomes `other`.
func Terminal(err error) error {
	e := asError(err)
	copied := *e
	copied.Terminal = true
	return &copied
}

// asError is err as the contract's error: the *Error it wraps, or `other` with its text.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Case: Other, Message: err.Error()}
}

// IsNotFound says whether err is the host's not-found: usually "it was deleted,
// nothing to do".
func IsNotFound(err error) bool { return hasCase(err, NotFound) }

// IsAlreadyExists says whether a create found the name taken.
func IsAlreadyExists(err error) bool { return hasCase(err, AlreadyExists) }

// IsForbidden says whether RBAC (or an admission rule) refused the call.
func IsForbidden(err error) bool { return hasCase(err, Forbidden) }

// IsConflict says whether a write conflicted with someone else's (a stale
// resourceVersion, or fields another manager owns).
func IsConflict(err error) bool { return hasCase(err, Conflict) }

// IsInvalid says whether the host or the API server found the input malformed.
func IsInvalid(err error) bool { return hasCase(err, Invalid) }

func hasCase(err error, c ErrorCase) bool {
	var e *Error
	return errors.As(err, &e) && e.Case == c
}
