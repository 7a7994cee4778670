package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/client"
)

// kill -9 of a real lemo serve while Tasks append, 20 times on one data
// folder, checked black-box through the remote API: every event a client
// received (events are published only once durable, so each is
// acknowledged) is in the history after the restart with identical bytes,
// and every history has contiguous seqs without duplicates.
func TestKill9WhileTasksAppend(t *testing.T) {
	const iterations = 20
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 9))
	t.Logf("seed %d", seed)
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, "tasks:\n  max_cycles: 1000000\n")
	received := make(map[string][]*api.Event) // per Task, contiguous from seq 1
	created := make(map[string]uint64)        // the last seq each create acknowledged
	var tasks []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	for i := 0; i <= iterations; i++ {
		d := serveRemote(t, data, "--config", cfg)
		c := d.connect(t, "")
		verifyHistories(t, c, received, created)
		if i == iterations {
			d.stop()
			break
		}
		// Keep every Task appending: continue the ones the kill
		// interrupted, and start two more.
		for _, id := range tasks {
			if _, err := c.Continue(ctx, id, ""); err != nil && !errors.Is(err, client.ErrConflict) {
				t.Fatalf("continue %s: %v", id, err)
			}
		}
		for k := 0; k < 2; k++ {
			m, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf("loop %d.%d", i, k), Model: "fake/loop"})
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, m.GetTaskId())
			created[m.GetTaskId()] = m.GetLastSeq()
		}
		// Follow every Task from what was received; kill after a random
		// number of new events.
		target := 10 + rng.IntN(150)
		var mu sync.Mutex
		var wg sync.WaitGroup
		reached, err := followFresh(t, ctx, c, tasks, received, &mu, target, &wg)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(60 * time.Second):
			t.Fatalf("iteration %d: the Tasks did not append %d events", i, target)
		}
		d.kill() // SIGKILL, while appends are in flight
		// The subscriptions end when the client notices.
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("iteration %d: the subscriptions did not end after the kill", i)
		}
		_ = c.Close()
		if t.Failed() {
			return
		}
	}
	total := 0
	for _, evs := range received {
		total += len(evs)
	}
	t.Logf("%d kills, %d Tasks, %d events received and found intact", iterations, len(tasks), total)
}

// verifyHistories checks each Task's history: seqs contiguous from 1, no
// duplicates, every received event present with identical bytes, and at
// least what its creation acknowledged.
func verifyHistories(t *testing.T, c *client.Conn, received map[string][]*api.Event, created map[string]uint64) {
	t.Helper()
	det := proto.MarshalOptions{Deterministic: true}
	for id, got := range received {
		hist, err := c.ReadHistory(context.Background(), id, 1)
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if err := contiguousFrom(hist, 1); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		if len(hist) < len(got) || uint64(len(hist)) < created[id] {
			t.Fatalf("task %s: history holds %d events; %d were received and %d acknowledged at creation", id, len(hist), len(got), created[id])
		}
		for i, ev := range got {
			a, _ := det.Marshal(ev)
			b, _ := det.Marshal(hist[i])
			if !bytes.Equal(a, b) {
				t.Fatalf("task %s seq %d: the stored event differs from the one received", id, ev.GetSeq())
			}
		}
	}
}

// followFresh subscribes to each of ids from the first seq received lacks,
// appends what arrives to received (under mu), checking that each event is
// the next of its Task, and closes the returned channel once target fresh
// events have arrived. The subscriptions end with the connection; wg waits
// for them.
func followFresh(t *testing.T, ctx context.Context, c *client.Conn, ids []string, received map[string][]*api.Event, mu *sync.Mutex, target int, wg *sync.WaitGroup) (<-chan struct{}, error) {
	t.Helper()
	fresh := 0
	reached := make(chan struct{})
	var once sync.Once
	for _, id := range ids {
		mu.Lock()
		from := uint64(len(received[id])) + 1
		mu.Unlock()
		sub, err := c.Subscribe(ctx, client.SubscribeOptions{TaskID: id, FromSeq: from, NoDeltas: true})
		if err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", id, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range sub.C {
				ev := u.GetEvent()
				if ev == nil {
					continue
				}
				mu.Lock()
				if want := uint64(len(received[id])) + 1; ev.GetSeq() != want {
					mu.Unlock()
					t.Errorf("task %s: received seq %d, want %d", id, ev.GetSeq(), want)
					return
				}
				received[id] = append(received[id], ev)
				fresh++
				if fresh >= target {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
			}
		}()
	}
	return reached, nil
}
