package isolation

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == InitArg {
		os.Exit(Main(os.Args[2:]))
	}
	if mode := os.Getenv(envHardenHelper); mode != "" {
		runHardenHelper(mode)
		return
	}
	goleak.VerifyTestMain(m)
}
