package api

import "time"

// TreeNode is one Task of a tree as the tree's budget arithmetic sees it:
// its links, its limits and its recorded spend (what the store's children
// index keeps of each child Task, so that a tree is read without decoding
// whole metadata).
type TreeNode struct {
	ID, Parent string
	// Children is how many children the Task spawned.
	Children uint32
	// Cycles is the number of the Task's last Cycle that started (its
	// reservation is in Spent from then on).
	Cycles uint32
	// Limits and Spent are the Task's BudgetSummary limits and spend
	// (including its open reservation); never nil.
	Limits, Spent *BudgetAmounts
	// RunningSince is when the Task's current working period began (zero
	// while it does not run): its working time grows from there.
	RunningSince time.Time
}

// TreeNodeOf is the TreeNode of a Task's metadata.
func TreeNodeOf(m *TaskMeta) TreeNode {
	b := m.GetBudget()
	n := TreeNode{ID: m.GetTaskId(), Parent: m.GetParentId(), Children: m.GetChildren(), Cycles: m.GetCycles(), Limits: amountsOf(b.GetLimits()), Spent: amountsOf(b.GetSpent())}
	if rs := b.GetRunningSince(); rs != nil {
		n.RunningSince = rs.AsTime()
	}
	return n
}

func amountsOf(a *BudgetAmounts) *BudgetAmounts {
	return &BudgetAmounts{Tokens: a.GetTokens(), CostNanoUsd: a.GetCostNanoUsd(), TimeMs: a.GetTimeMs()}
}

// AddSpent adds the node's spend by now (its working time running on while
// it runs) to sum, as BudgetSpent does for a BudgetSummary.
func (n *TreeNode) AddSpent(sum *BudgetAmounts, now time.Time) {
	sum.Tokens = addSat(sum.Tokens, n.Spent.GetTokens())
	sum.CostNanoUsd = addSat(sum.CostNanoUsd, n.Spent.GetCostNanoUsd())
	t := n.Spent.GetTimeMs()
	if !n.RunningSince.IsZero() {
		if d := now.Sub(n.RunningSince); d > 0 {
			t = addSat(t, uint64(d.Milliseconds()))
		}
	}
	sum.TimeMs = addSat(sum.TimeMs, t)
}
