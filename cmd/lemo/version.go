package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"lemo/api"
)

// Stamped at build time: -ldflags "-X main.buildVersion=... -X main.buildCommit=...".
var (
	buildVersion = "dev"
	buildCommit  = ""
)

func commit() string {
	if buildCommit != "" {
		return buildCommit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func version(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON for scripts")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return usageError("version takes no arguments")
	}
	if *asJSON {
		b, _ := json.Marshal(struct {
			Version     string `json:"version"`
			Commit      string `json:"commit"`
			Go          string `json:"go"`
			OS          string `json:"os"`
			Arch        string `json:"arch"`
			APIProtocol int    `json:"api_protocol"`
		}{buildVersion, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH, int(api.ProtocolVersion)})
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "lemo %s\ncommit %s\n%s %s/%s\napi protocol %d\n", buildVersion, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH, api.ProtocolVersion)
	return nil
}
