package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lemo/tools"
)

// spawnTree records the spawn request it is given.
type spawnTree struct {
	tools.Tree
	got tools.SpawnRequest
}

func (s *spawnTree) Spawn(_ context.Context, in tools.SpawnRequest) (string, bool, error) {
	s.got = in
	return "C1", false, nil
}

// tasks.spawn passes the budget a call asks for to the tree, the cost
// exactly in nano-USD; a cost it cannot read is refused, saying what is
// accepted.
func TestSpawnBudgetInput(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  tools.SpawnRequest
		err   string
	}{
		{`{"request":"r"}`, tools.SpawnRequest{Request: "r"}, ""},
		{`{"request":"r","max_tokens":5000,"max_cost_usd":0.25,"max_time_seconds":90}`,
			tools.SpawnRequest{Request: "r", MaxTokens: 5000, MaxCostNanoUSD: 250_000_000, MaxTime: 90 * time.Second}, ""},
		{`{"request":"r","max_cost_usd":1e-3}`, tools.SpawnRequest{}, "max_cost_usd"},
	} {
		tree := &spawnTree{}
		_, err := (&Spawn{}).Execute(context.Background(), tools.Call{Input: json.RawMessage(tc.input), Tree: tree}, nil)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "dollar amount") {
				t.Errorf("%s: err = %v, want one naming %s and what is accepted", tc.input, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.input, err)
		case tree.got.Request != tc.want.Request || tree.got.MaxTokens != tc.want.MaxTokens || tree.got.MaxCostNanoUSD != tc.want.MaxCostNanoUSD || tree.got.MaxTime != tc.want.MaxTime:
			t.Errorf("%s: spawn request = %+v, want %+v", tc.input, tree.got, tc.want)
		}
	}
}
