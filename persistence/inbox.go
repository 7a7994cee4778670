package persistence

import (
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// Inbox entries: x/<recipient>/<sender>/<sender seq:8> holds an
// api.InboxEntry, a message or a child's end waiting for its recipient. The
// sender writes it in the commit of its own record (an Extra of its
// append); the recipient takes it into its history in a commit that deletes
// it (InboxTake). The sender's seq makes the key unique and names the
// sender's record.
const prefixInbox = 'x'

func inboxPrefix(recipient string) []byte {
	k := append([]byte{prefixInbox, '/'}, recipient...)
	return append(k, '/')
}

// InboxKey is the key of recipient's inbox entry from sender's record at
// seq.
func InboxKey(recipient, sender string, seq uint64) []byte {
	k := append(inboxPrefix(recipient), sender...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, seq)
}

// InboxPut returns the extra key that puts e in recipient's inbox, for the
// append of the sender's record at e.FromSeq.
func InboxPut(recipient string, e *api.InboxEntry) (KV, error) {
	if err := ValidTaskID(recipient); err != nil {
		return KV{}, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
	if err != nil {
		return KV{}, fmt.Errorf("%w: inbox entry: %v", ErrInvalid, err)
	}
	return KV{Key: InboxKey(recipient, e.GetFrom(), e.GetFromSeq()), Value: b}, nil
}

// InboxItem is one entry of an inbox and its key (delete it in the commit
// that records it: KV{Key: Key, Delete: true}).
type InboxItem struct {
	Key   []byte
	Entry *api.InboxEntry
}

// Inbox returns recipient's inbox entries in key order (by sender, then by
// the sender's seq), at most limit (0: all).
func (s *Store) Inbox(recipient string, limit int) ([]InboxItem, error) {
	if err := ValidTaskID(recipient); err != nil {
		return nil, err
	}
	var out []InboxItem
	err := s.db.View(func(txn *badger.Txn) error {
		prefix := inboxPrefix(recipient)
		opt := badger.DefaultIteratorOptions
		opt.Prefix = prefix
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			e := new(api.InboxEntry)
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, e) }); err != nil {
				return fmt.Errorf("decode inbox entry %q: %w", it.Item().Key(), err)
			}
			out = append(out, InboxItem{Key: it.Item().KeyCopy(nil), Entry: e})
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return nil
	})
	return out, err
}
