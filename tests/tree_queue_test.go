package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"lemo/api"
	"lemo/client"
	"lemo/providers/fake"
)

// With two places for child Tasks daemon-wide, a parent spawns five: two
// run, three are queued and say so (lemo tasks). After kill -9 and a
// restart the queue is the store's: continuing the parent runs the
// children two at a time (their recorded running spans never overlap
// more than twice) until all five finished.
func TestTreeQueueAcrossKill9(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	spawns := make([]fake.Call, 5)
	for i := range spawns {
		spawns[i] = call("tasks_spawn", fmt.Sprintf(`{"request":"QCHILD %d"}`, i+1))
	}
	f := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama, Script: []fake.Scenario{
		{Match: "QPARENT", ToolCalls: spawns},
		{AfterTool: true, Text: []string{"spawned"}},
		// The first two children hold their model calls until the kill;
		// every later call answers.
		{Match: "QCHILD", Times: 2, Hold: true},
		{Match: "QCHILD", Text: []string{"child done"}},
	}})
	env := []string{"LEMO_OLLAMA_BASE_URL=" + f.URL(), "LEMO_TASKS_MAX_RUNNING_CHILDREN=2"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, c := serveTreeEnv(t, data, env)
	root, err := c.CreateTask(ctx, client.CreateTask{Request: "QPARENT five children", Model: treeModel})
	if err != nil {
		t.Fatal(err)
	}
	waitTree(t, c, d.daemon, root.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	spawned, _ := children(treeHistory(t, c, root.GetTaskId()))
	if len(spawned) != 5 {
		t.Fatalf("spawned %d children, want 5\n%s", len(spawned), dumpTree(c, root.GetTaskId(), ""))
	}
	count := func(want map[string]int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := map[string]int{}
			for _, cs := range spawned {
				m, err := c.Task(ctx, cs.GetChildId())
				if err != nil {
					t.Fatal(err)
				}
				w := strings.ToLower(strings.TrimPrefix(m.GetStatus().String(), "TASK_STATUS_"))
				if m.GetStatus() == api.TaskStatus_TASK_STATUS_CREATED && strings.HasPrefix(m.GetStatusDetail(), "queued") {
					w = "queued"
				}
				got[w]++
			}
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("children %v, want %v\n%s", got, want, dumpTree(c, root.GetTaskId(), ""))
			}
			time.Sleep(5 * time.Millisecond) // polling the daemon
		}
	}
	count(map[string]int{"running": 2, "queued": 3})
	out, code := cli(t, data, "tasks", "--tree")
	if code != 0 || strings.Count(out, " queued ") != 3 {
		t.Fatalf("lemo tasks --tree (exit %d) shows %d queued children, want 3:\n%s", code, strings.Count(out, " queued "), out)
	}
	// The running children's actors are children of their parent's actor
	// (finished, it stays in memory while they run); so are the queued
	// ones' while they record that they wait.
	out, code = cli(t, data, "console", "--json")
	var tree struct {
		Actors []struct{ ID, Kind, State string }
	}
	mustJSON(t, out, &tree)
	nested := map[string]int{}
	for _, a := range tree.Actors {
		if a.Kind == "task" && strings.HasPrefix(a.ID, "daemon/tasks/"+root.GetTaskId()+"/") && strings.Count(a.ID, "/") == 3 {
			nested[a.State]++
		}
	}
	if code != 0 || nested["running"] != 2 {
		t.Fatalf("lemo console --json shows child Task actors %v under the parent's, want the 2 running (exit %d)\n%s", nested, code, out)
	}
	d.kill()
	_ = c.Close()

	d, c = serveTreeEnv(t, data, env)
	defer d.stop()
	count(map[string]int{"paused": 2, "queued": 3})
	if _, err := c.Continue(ctx, root.GetTaskId(), ""); err != nil && !strings.Contains(err.Error(), "finished") {
		t.Fatalf("continue the parent: %v", err)
	}
	for _, cs := range spawned {
		waitTree(t, c, d.daemon, cs.GetChildId(), api.TaskStatus_TASK_STATUS_FINISHED)
	}
	// Each child held a place from its start to its end: at no time did
	// more than two hold one.
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, cs := range spawned {
		var start, end time.Time
		for _, ev := range treeHistory(t, c, cs.GetChildId()) {
			sc := ev.GetStatusChanged()
			switch {
			case sc == nil:
			case sc.GetStatus() == api.TaskStatus_TASK_STATUS_RUNNING && start.IsZero():
				start = ev.GetTime().AsTime()
			case sc.GetStatus() == api.TaskStatus_TASK_STATUS_FINISHED:
				end = ev.GetTime().AsTime()
			}
		}
		if start.IsZero() || end.IsZero() {
			t.Fatalf("child %s has no start or end\n%s", cs.GetChildId(), dumpTree(c, cs.GetChildId(), ""))
		}
		edges = append(edges, edge{start, 1}, edge{end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	if most != 2 {
		t.Fatalf("at most %d children ran at once, want 2 (the limit)\n%s", most, dumpTree(c, root.GetTaskId(), ""))
	}
	// A child that waited says so in its history, as lemo attach shows it.
	queuedSeen := 0
	for _, cs := range spawned {
		out, code := cli(t, data, "attach", cs.GetChildId())
		if code != 0 {
			t.Fatalf("lemo attach %s: exit %d\n%s", cs.GetChildId(), code, out)
		}
		if strings.Contains(out, "[created: queued: ") {
			queuedSeen++
		}
	}
	if queuedSeen != 3 {
		t.Fatalf("lemo attach shows %d children queued, want 3", queuedSeen)
	}
}
