package persistence

import "errors"

// Errors returned by the store.
var (
	// ErrNotFound: no such Task or record.
	ErrNotFound = errors.New("persistence: not found")
	// ErrSeqConflict: an append did not continue the stored log (a stale
	// writer, or a duplicate Task id).
	ErrSeqConflict = errors.New("persistence: sequence conflict")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("persistence: store closed")
	// ErrTooLarge: a single event or append exceeds what one record or one
	// transaction can hold.
	ErrTooLarge = errors.New("persistence: too large")
	// ErrLocked: another process holds the data folder.
	ErrLocked = errors.New("persistence: data folder in use")
	// ErrInvalid: an append or id is malformed.
	ErrInvalid = errors.New("persistence: invalid")
	// ErrNeedsRecovery: a read-only open found a store that was not closed
	// cleanly (its process was killed); a read-write open recovers it.
	ErrNeedsRecovery = errors.New("persistence: the store was not closed cleanly; opening it read-write (lemo serve) recovers it")
)
