package providers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Class classifies a provider failure; supervision decides on it.
type Class int

// Failure classes.
const (
	// ClassTransient: a 5xx, a reset connection, a truncated stream; may
	// succeed when retried.
	ClassTransient Class = iota + 1
	// ClassRateLimit: too many requests; RetryAfter says when to retry if
	// the provider said.
	ClassRateLimit
	// ClassQuota: credits or a usage quota are exhausted; retrying soon will
	// not help.
	ClassQuota
	// ClassAuth: missing, wrong or unauthorised credentials.
	ClassAuth
	// ClassModelNotFound: the model does not exist or is not available.
	ClassModelNotFound
	// ClassContextOverflow: the input is larger than the model's window.
	ClassContextOverflow
	// ClassBadRequest: the provider rejected the request as invalid.
	ClassBadRequest
	// ClassCancelled: the caller cancelled; not a failure of the provider.
	ClassCancelled
)

var classNames = map[Class]string{
	ClassTransient:       "transient",
	ClassRateLimit:       "rate_limit",
	ClassQuota:           "quota",
	ClassAuth:            "auth",
	ClassModelNotFound:   "model_not_found",
	ClassContextOverflow: "context_overflow",
	ClassBadRequest:      "bad_request",
	ClassCancelled:       "cancelled",
}

// String returns the class's stable name, as recorded in history.
func (c Class) String() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Retryable reports whether a failure of this class may be retried (only
// when no output has streamed yet).
func (c Class) Retryable() bool { return c == ClassTransient || c == ClassRateLimit }

// ErrTruncated is wrapped by errors for streams that ended without their
// terminal marker.
var ErrTruncated = errors.New("providers: stream ended without its terminal marker")

// Error is a classified provider failure.
type Error struct {
	// Provider is the provider's name.
	Provider string
	Class    Class
	// Status is the HTTP status, 0 when there was none.
	Status int
	// RetryAfter is the wait the provider asked for, 0 when it did not say.
	RetryAfter time.Duration
	// Message is the provider's explanation, bounded.
	Message string
	// OutputStarted reports that some output had streamed before the failure.
	OutputStarted bool
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	s := e.Provider + ": " + e.Class.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && e.Message == "" {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err: the Class of an *Error in its chain,
// ClassCancelled for context cancellation, else ClassTransient.
func ClassOf(err error) Class {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassCancelled
	}
	return ClassTransient
}

// Cancelled returns the *Error a provider reports when ctx ended.
func Cancelled(provider string, err error) *Error {
	return &Error{Provider: provider, Class: ClassCancelled, Message: "request cancelled", Err: err}
}
