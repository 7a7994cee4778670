package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
)

// treeKillScript is a tree of depth 3: a root spawns two children, each of
// them one grandchild, which spawns one great-grandchild; each waits for
// its children (spawn with wait). A great-grandchild messages its parent
// before it answers.
var treeKillScript = []fake.Scenario{
	{Match: "KROOT", ToolCalls: []fake.Call{
		call("tasks_spawn", `{"request":"KMID one","wait":true,"timeout":3000}`),
		call("tasks_spawn", `{"request":"KMID two","wait":true,"timeout":3000}`),
	}},
	{Match: "KMID", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"KLOW below","wait":true,"timeout":3000}`)}},
	{Match: "KLOW", ToolCalls: []fake.Call{call("tasks_spawn", `{"request":"KLEAF at the bottom","wait":true,"timeout":3000}`)}},
	{Match: "KLEAF", ToolCalls: []fake.Call{call("tasks_send", `{"to":"parent","text":"KMSG from the leaf"}`)}},
	{AfterTool: true, Match: `"relation":"parent"`, Text: []string{"leaf done"}},
	{AfterTool: true, Match: `"id"`, Text: []string{"KDONE"}},
	{Match: "[inbox]", Text: []string{"KDONE"}},
}

// kill -9 of the daemon at random moments while trees of depth 3 spawn,
// wait and message: afterwards no Task is lost or duplicated, every child
// has its parent's record and the parent its child's, no message is lost
// or delivered twice, and continuing a root finishes its whole tree.
func TestTreeKill9(t *testing.T) {
	const iterations = 20
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 14))
	t.Logf("seed %d", seed)
	data := filepath.Join(t.TempDir(), "data")
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: treeKillScript})
	env := []string{"LEMO_OLLAMA_BASE_URL=" + f.URL()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var roots []string
	kills := 0
	for i := 0; i <= iterations; i++ {
		d, c := serveTreeEnv(t, data, env)
		metas := allTasks(t, c)
		checkTrees(t, c, metas, false)
		if i == iterations {
			// Continue every root: each tree finishes.
			for _, r := range roots {
				if _, err := c.Continue(ctx, r, ""); err != nil && !errors.Is(err, client.ErrConflict) {
					t.Fatalf("continue %s: %v", r, err)
				}
			}
			for _, r := range roots {
				waitTree(t, c, d.daemon, r, api.TaskStatus_TASK_STATUS_FINISHED)
			}
			metas = allTasks(t, c)
			checkTrees(t, c, metas, true)
			t.Logf("%d kills, %d trees, %d Tasks, all consistent and finished", kills, len(roots), len(metas))
			d.stop()
			return
		}
		// Continue the unfinished trees, and start one more now and then.
		for _, r := range roots {
			if _, err := c.Continue(ctx, r, ""); err != nil && !errors.Is(err, client.ErrConflict) {
				t.Fatalf("iteration %d: continue %s: %v", i, r, err)
			}
		}
		if len(roots) == 0 || rng.IntN(3) == 0 {
			m, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf("KROOT tree %d", i), Model: treeModel})
			if err != nil {
				t.Fatal(err)
			}
			roots = append(roots, m.GetTaskId())
		}
		// Kill after a random number of new events in the trees.
		start := seqSum(metas)
		target := start + 3 + uint64(rng.IntN(60))
		deadline := time.Now().Add(60 * time.Second)
		for {
			ms := allTasks(t, c)
			if seqSum(ms) >= target || allFinished(ms, roots) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("iteration %d: the trees did not reach %d events (at %d)\n%s", i, target, seqSum(ms), dumpTree(c, roots[len(roots)-1], ""))
			}
			time.Sleep(time.Millisecond) // polling the daemon
		}
		d.kill()
		kills++
		_ = c.Close()
		if t.Failed() {
			return
		}
	}
}

func allTasks(t *testing.T, c *client.Conn) []*api.TaskMeta {
	t.Helper()
	var out []*api.TaskMeta
	before := ""
	for {
		page, next, err := c.ListTasks(context.Background(), before, 200)
		if err != nil {
			t.Fatalf("list tasks: %v", err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		before = next
	}
}

func seqSum(ms []*api.TaskMeta) uint64 {
	var n uint64
	for _, m := range ms {
		n += m.GetLastSeq()
	}
	return n
}

func allFinished(ms []*api.TaskMeta, roots []string) bool {
	done := map[string]bool{}
	for _, m := range ms {
		done[m.GetTaskId()] = m.GetStatus() == api.TaskStatus_TASK_STATUS_FINISHED
	}
	for _, r := range roots {
		if !done[r] {
			return false
		}
	}
	return true
}

// checkTrees checks the links and messages of every Task: each child is
// recorded once by its parent with the call that spawned it and names that
// parent; no call spawned twice; each child's end and each message is
// recorded at most once, and only when sent. finished: every tree ended,
// so every end and message was delivered exactly once and every Task
// finished.
func checkTrees(t *testing.T, c *client.Conn, metas []*api.TaskMeta, finished bool) {
	t.Helper()
	hist := map[string][]*api.Event{}
	byID := map[string]*api.TaskMeta{}
	for _, m := range metas {
		if byID[m.GetTaskId()] != nil {
			t.Fatalf("task %s listed twice", m.GetTaskId())
		}
		byID[m.GetTaskId()] = m
		hist[m.GetTaskId()] = treeHistory(t, c, m.GetTaskId())
	}
	type msgKey struct {
		from string
		seq  uint64
	}
	sent := map[msgKey]string{} // -> recipient
	ends := map[msgKey]string{}
	maxDepth := uint32(0)
	for id, evs := range hist {
		tc := evs[0].GetTaskCreated()
		maxDepth = max(maxDepth, tc.GetDepth())
		if p := tc.GetParentId(); p != "" {
			n := 0
			for _, ev := range hist[p] {
				if cs := ev.GetChildSpawned(); cs != nil && cs.GetChildId() == id {
					n++
					if cs.GetCallId() != tc.GetParentCallId() {
						t.Errorf("child %s: spawned by call %s, names call %s", id, cs.GetCallId(), tc.GetParentCallId())
					}
				}
			}
			if n != 1 {
				t.Errorf("child %s is recorded %d times by its parent %s, want once", id, n, p)
			}
			if byID[p] == nil || byID[p].GetDepth()+1 != tc.GetDepth() {
				t.Errorf("child %s at depth %d under parent %s (%v)", id, tc.GetDepth(), p, byID[p])
			}
		}
		calls := map[string]bool{}
		seenEnd := map[msgKey]bool{}
		seenMsg := map[msgKey]bool{}
		for _, ev := range evs {
			switch b := ev.Body.(type) {
			case *api.Event_ChildSpawned:
				cs := b.ChildSpawned
				if calls[cs.GetCallId()] {
					t.Errorf("task %s: call %s spawned twice", id, cs.GetCallId())
				}
				calls[cs.GetCallId()] = true
				if byID[cs.GetChildId()].GetParentId() != id {
					t.Errorf("task %s spawned %s, which names parent %q", id, cs.GetChildId(), byID[cs.GetChildId()].GetParentId())
				}
			case *api.Event_MessageSent:
				sent[msgKey{id, ev.GetSeq()}] = b.MessageSent.GetTo()
			case *api.Event_MessageReceived:
				k := msgKey{b.MessageReceived.GetFrom(), b.MessageReceived.GetFromSeq()}
				if seenMsg[k] {
					t.Errorf("task %s received message %v twice", id, k)
				}
				seenMsg[k] = true
			case *api.Event_ChildEnded:
				k := msgKey{b.ChildEnded.GetChildId(), b.ChildEnded.GetChildSeq()}
				if seenEnd[k] {
					t.Errorf("task %s recorded the end %v twice", id, k)
				}
				seenEnd[k] = true
				ends[k] = id
			}
		}
		for k := range seenMsg {
			if to, ok := sent[k]; ok && to != id {
				t.Errorf("message %v to %s was received by %s", k, to, id)
			}
		}
	}
	// Every received message was sent (checked once all are known).
	for id, evs := range hist {
		for _, ev := range evs {
			if m := ev.GetMessageReceived(); m != nil {
				if to, ok := sent[msgKey{m.GetFrom(), m.GetFromSeq()}]; !ok || to != id {
					t.Errorf("task %s received %v, which %s never sent to it", id, m, m.GetFrom())
				}
			}
		}
	}
	if !finished {
		return
	}
	if maxDepth != 3 {
		t.Errorf("deepest Task at depth %d, want 3", maxDepth)
	}
	received := map[msgKey]int{}
	for _, evs := range hist {
		for _, ev := range evs {
			if m := ev.GetMessageReceived(); m != nil {
				received[msgKey{m.GetFrom(), m.GetFromSeq()}]++
			}
		}
	}
	for k, to := range sent {
		if received[k] != 1 {
			t.Errorf("message %v to %s was received %d times, want once", k, to, received[k])
		}
	}
	for id, m := range byID {
		if m.GetStatus() != api.TaskStatus_TASK_STATUS_FINISHED {
			t.Errorf("task %s is %v after its tree finished", id, m.GetStatus())
		}
		if p := m.GetParentId(); p != "" {
			found := false
			for k, rec := range ends {
				if k.from == id && rec == p {
					found = true
				}
			}
			if !found {
				t.Errorf("parent %s never recorded the end of %s", p, id)
			}
		}
	}
}
