package fake

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the HTTP fakes (and everything else in the
// package) leave no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
