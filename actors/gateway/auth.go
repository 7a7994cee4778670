package gateway

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"lemo/actors"
	"lemo/persistence"
)

// Principal is who a token stands for: one owner, or an operator who sees
// every owner's Tasks (and creates Tasks as Owner).
type Principal struct {
	Owner    string
	Operator bool
}

// Caller returns the daemon API's caller for p.
func (p Principal) Caller() actors.Caller { return actors.Caller{Owner: p.Owner, Operator: p.Operator} }

// Token is one accepted token.
type Token struct {
	Secret string
	Principal
}

// Tokens maps secrets to principals. Secrets are kept only as SHA-256
// digests, and looked up by digest, so a lookup's timing says nothing about
// how much of a guess was right.
type Tokens struct {
	by map[[32]byte]Principal
}

// Minimum length of a token; generated tokens are 43 characters.
const minTokenLen = 16

// NewTokens checks every token and returns the set. Tokens must be at
// least 16 printable characters without spaces, owners valid owner names,
// and no secret may appear twice.
func NewTokens(list ...Token) (*Tokens, error) {
	t := &Tokens{by: make(map[[32]byte]Principal, len(list))}
	var problems []string
	for i, tk := range list {
		if err := validSecret(tk.Secret); err != nil {
			problems = append(problems, fmt.Sprintf("token %d (%s): %v", i+1, tk.Owner, err))
			continue
		}
		if err := persistence.ValidOwner(tk.Owner); err != nil {
			problems = append(problems, fmt.Sprintf("token %d: %v", i+1, err))
			continue
		}
		h := sha256.Sum256([]byte(tk.Secret))
		if _, dup := t.by[h]; dup {
			problems = append(problems, fmt.Sprintf("token %d (%s): the same token is listed twice", i+1, tk.Owner))
			continue
		}
		t.by[h] = tk.Principal
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("gateway: tokens: %s", strings.Join(problems, "; "))
	}
	if len(t.by) == 0 {
		return nil, errors.New("gateway: no token configured: every client must present one")
	}
	return t, nil
}

func validSecret(s string) error {
	if len(s) < minTokenLen {
		return fmt.Errorf("too short: want at least %d characters", minTokenLen)
	}
	if len(s) > 256 {
		return errors.New("too long: want at most 256 characters")
	}
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return errors.New("want printable ASCII without spaces")
		}
	}
	return nil
}

// Lookup returns the principal of secret.
func (t *Tokens) Lookup(secret string) (Principal, bool) {
	if t == nil || secret == "" {
		return Principal{}, false
	}
	p, ok := t.by[sha256.Sum256([]byte(secret))]
	return p, ok
}

// NewSecret returns a fresh random token (256 bits, URL-safe base64).
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("gateway: crypto/rand failed: %v", err)) // the OS cannot fail this
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LoadOrCreateToken returns the token stored in path, creating it (mode
// 0600, with a fresh secret) when the file does not exist. A file readable
// by others than its owner is refused.
func LoadOrCreateToken(path string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		secret := NewSecret()
		if err := writePrivate(path, []byte(secret+"\n")); err != nil {
			return "", fmt.Errorf("write token %s: %w", path, err)
		}
		return secret, nil
	case err != nil:
		return "", fmt.Errorf("token %s: %w", path, err)
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("token %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token %s: %w", path, err)
	}
	secret := strings.TrimSpace(string(b))
	if err := validSecret(secret); err != nil {
		return "", fmt.Errorf("token %s: %v", path, err)
	}
	return secret, nil
}

// WriteToken stores secret in path with mode 0600 (replacing the file).
func WriteToken(path, secret string) error {
	if err := validSecret(secret); err != nil {
		return fmt.Errorf("token: %v", err)
	}
	return writePrivate(path, []byte(secret+"\n"))
}

// writePrivate writes data to path with mode 0600 through a temporary file
// and a rename, so a reader never sees a partial file.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}

// ParseTokensFile reads a tokens file: one "owner token" pair per line;
// the owner "*" makes the token an operator's (whose Tasks are created as
// operatorOwner). Blank lines and lines starting with # are ignored. The
// file must not be readable by others than its owner.
func ParseTokensFile(path, operatorOwner string) ([]Token, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("tokens file %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return ParseTokens(path, data, operatorOwner)
}

// ParseTokens parses the content of a tokens file; name locates problems.
func ParseTokens(name string, data []byte, operatorOwner string) ([]Token, error) {
	var out []Token
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			problems = append(problems, fmt.Sprintf("%s:%d: want \"owner token\" (or \"* token\" for an operator)", name, n))
			continue
		}
		tk := Token{Secret: f[1], Principal: Principal{Owner: f[0]}}
		if f[0] == "*" {
			tk.Principal = Principal{Owner: operatorOwner, Operator: true}
		}
		out = append(out, tk)
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", name, err))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}
