package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"lemo/tools/isolation"
)

func TestMain(m *testing.M) {
	// lemo doctor tries namespaces with this binary as their init.
	if len(os.Args) > 1 && os.Args[1] == isolation.InitArg {
		os.Exit(isolation.Main(os.Args[2:]))
	}
	// lemo doctor starts this binary as an MCP server.
	if os.Getenv("LEMOTEST_MCP_SERVER") != "" {
		os.Exit(serveTestMCP())
	}
	goleak.VerifyTestMain(m)
}
