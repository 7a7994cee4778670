package isolation

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHardenHelper); mode != "" {
		runHardenHelper(mode)
		return
	}
	goleak.VerifyTestMain(m)
}
