package actors_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"lemo/actors"
	"lemo/api"
	"lemo/providers/fake"
)

// badgerMagic is the store's external magic number (persistence/store.go),
// which Badger checks on open.
const badgerMagic = 0x4c31

// A Task whose stored metadata cannot be read fails its activation with an
// error that says so, instead of running on without its metadata.
func TestActivationFailsOnUnreadableMetadata(t *testing.T) {
	h := newHarness(t, fake.Sequence(fake.Turn{Text: "done"}, fake.Turn{Text: "again"}))
	id := h.create("finish once")
	h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	h.stop()

	// Damage the Task's metadata record ("m/<task>") behind the store.
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(h.dir, "store")).WithLogger(nil).WithExternalMagic(badgerMagic))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("m/"+id), []byte{0xff, 0xff, 0xff}) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	h.start()
	_, err = h.d.SendMessage(context.Background(), actors.Operator, id, "once more")
	if err == nil || !strings.Contains(err.Error(), "read the metadata of task "+id) {
		t.Fatalf("SendMessage to a Task with damaged metadata: err = %v, want the activation to fail reading its metadata", err)
	}
}
