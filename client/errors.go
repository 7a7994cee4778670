package client

import (
	"errors"
	"fmt"
	"strings"

	"lemo/api"
)

// Errors a client can branch on. Errors the daemon returns are *Error
// values that match these with errors.Is by their code.
var (
	// ErrNotRunning: no daemon answers at the address.
	ErrNotRunning = errors.New("the lemo daemon is not running")
	// ErrUnauthenticated: the daemon refused the token.
	ErrUnauthenticated = errors.New("the daemon refused the token")
	// ErrNotFound: no such Task (or one this token may not see), approval,
	// subscription or service.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the command is malformed: the daemon found it so, or the
	// client before sending it (text that is not UTF-8 or holds control
	// characters, a message that cannot be encoded).
	ErrInvalid = errors.New("invalid")
	// ErrConflict: the command conflicts with the current state.
	ErrConflict = errors.New("conflict")
	// ErrBusy: too many commands or subscriptions in flight.
	ErrBusy = errors.New("busy")
	// ErrTooLarge: a message exceeds a bound.
	ErrTooLarge = errors.New("too large")
	// ErrPermissionDenied: the token may not do this (an operator's
	// command, such as Inspect or StopCall).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnavailable: the daemon is stopping, or does not offer this.
	ErrUnavailable = errors.New("unavailable")
	// ErrTimeout: no answer in time.
	ErrTimeout = errors.New("timeout")
	// ErrDisconnected: the session ended (the daemon stopped or restarted)
	// while the command was in flight; retrying opens a new session.
	ErrDisconnected = errors.New("disconnected from the daemon")
	// ErrClosed: the Conn was closed.
	ErrClosed = errors.New("client: connection closed")
)

// Error is a command's failure as the daemon reported it.
type Error struct {
	Code    api.ErrorCode
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	return target == sentinel(e.Code)
}

func sentinel(c api.ErrorCode) error {
	switch c {
	case api.ErrorCode_ERROR_CODE_INVALID:
		return ErrInvalid
	case api.ErrorCode_ERROR_CODE_NOT_FOUND:
		return ErrNotFound
	case api.ErrorCode_ERROR_CODE_UNAUTHENTICATED:
		return ErrUnauthenticated
	case api.ErrorCode_ERROR_CODE_CONFLICT:
		return ErrConflict
	case api.ErrorCode_ERROR_CODE_BUSY:
		return ErrBusy
	case api.ErrorCode_ERROR_CODE_TOO_LARGE:
		return ErrTooLarge
	case api.ErrorCode_ERROR_CODE_PERMISSION_DENIED:
		return ErrPermissionDenied
	case api.ErrorCode_ERROR_CODE_UNAVAILABLE:
		return ErrUnavailable
	case api.ErrorCode_ERROR_CODE_TIMEOUT:
		return ErrTimeout
	}
	return nil
}

func fromAPI(e *api.Error) error {
	return &Error{Code: e.GetCode(), Message: e.GetMessage()}
}

// CodeName returns an error code as people read it ("not_found").
func CodeName(c api.ErrorCode) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "ERROR_CODE_"))
}

func unexpected(resp *api.Response, want string) error {
	return fmt.Errorf("client: unexpected answer %T, want %s", resp.GetResult(), want)
}
