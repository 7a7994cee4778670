package persistence

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"lemo/internal/names"
)

// crockford is the ULID alphabet: time-sortable, no '/', case-insensitive.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewTaskID returns a new time-sortable Task id (26 characters, ULID-style:
// 48 bits of milliseconds then 80 random bits).
func NewTaskID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(fmt.Sprintf("persistence: crypto/rand failed: %v", err)) // the OS cannot fail this
	}
	return encode128(b)
}

func encode128(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// ValidTaskID checks the form of a Task id: 1 to 64 characters of
// [0-9A-Za-z_-]. Ids never contain '/', which protoactor uses for its tree.
func ValidTaskID(id string) error {
	if !names.TaskID(id) {
		return fmt.Errorf("%w task id %q: want %s", ErrInvalid, id, names.TaskIDForm)
	}
	return nil
}

// ValidOwner checks the form of an owner name: 1 to 64 characters of
// [0-9A-Za-z_.@-].
func ValidOwner(owner string) error {
	if !names.Owner(owner) {
		return fmt.Errorf("%w owner %q: want %s", ErrInvalid, owner, names.OwnerForm)
	}
	return nil
}
