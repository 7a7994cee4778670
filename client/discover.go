package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Files a daemon writes into its data folder for local clients.
const (
	DaemonFile = "daemon.json"
	TokenFile  = "token"
)

// Local is a daemon found through its data folder.
type Local struct {
	Address    string `json:"address"`
	PID        int    `json:"pid"`
	APIVersion int    `json:"api_version"`
	Version    string `json:"version"`
	TLS        bool   `json:"tls"`
	// Token is the data folder's token ("" when it cannot be read).
	Token string `json:"-"`
	// TokenErr says why the token could not be read.
	TokenErr error `json:"-"`
}

// NotRunningError says that no daemon runs on a data folder, and how to
// start one. It matches ErrNotRunning.
type NotRunningError struct {
	Data   string
	Reason string
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("the lemo daemon is not running (%s); start it with: lemo serve --data %s", e.Reason, e.Data)
}

func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }

// FindLocal reads the daemon.json and token a running daemon keeps in its
// data folder. It fails with a *NotRunningError when there is none or when
// it names a process that is gone (the daemon was killed).
func FindLocal(data string) (*Local, error) {
	abs, err := filepath.Abs(data)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(abs, DaemonFile))
	if errors.Is(err, os.ErrNotExist) {
		reason := "no " + DaemonFile + " in " + abs
		if _, serr := os.Stat(abs); errors.Is(serr, os.ErrNotExist) {
			reason = abs + " does not exist"
		}
		return nil, &NotRunningError{Data: abs, Reason: reason}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(abs, DaemonFile), err)
	}
	var l Local
	if err := json.Unmarshal(b, &l); err != nil || l.Address == "" {
		return nil, fmt.Errorf("%s is damaged: %v", filepath.Join(abs, DaemonFile), err)
	}
	if l.PID > 0 && !alive(l.PID) {
		return nil, &NotRunningError{Data: abs, Reason: fmt.Sprintf("%s names process %d, which has exited", DaemonFile, l.PID)}
	}
	tb, err := os.ReadFile(filepath.Join(abs, TokenFile))
	if err != nil {
		l.TokenErr = fmt.Errorf("read the daemon's token: %w (run as the daemon's user, or pass --token)", err)
	} else {
		l.Token = strings.TrimSpace(string(tb))
	}
	return &l, nil
}

// alive reports whether process pid exists (a process of another user
// counts).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
