package api

import "fmt"

// SupervisionNote says what the supervision of the actor tree decided
// about a failure, for people reading a history: "" when it decided
// nothing; else "stopped", "restarted (crash 2 of 3 allowed)" or "stopped
// (crash 4, over the budget of 3)".
func (f *Failure) SupervisionNote() string {
	d := f.GetDecision()
	switch d {
	case "":
		return ""
	case "stop":
		d = "stopped"
	case "restart":
		d = "restarted"
	}
	switch {
	case f.GetCrashes() == 0:
		return d
	case f.GetCrashes() > f.GetBudget():
		return fmt.Sprintf("%s (crash %d, over the budget of %d)", d, f.GetCrashes(), f.GetBudget())
	default:
		return fmt.Sprintf("%s (crash %d of %d allowed)", d, f.GetCrashes(), f.GetBudget())
	}
}
