// Command fakeprovider serves one of the HTTP fake providers as a separate
// process, for end-to-end tests that run `lemo serve` against it by base
// URL.
//
// Usage:
//
//	fakeprovider -flavor openrouter [-script scenarios.json] [-addr 127.0.0.1:0] [-api-key KEY]
//
// It prints one line, "FAKE_URL=<base URL>", once it listens (the base URL
// includes the flavour's path prefix), then serves until SIGINT or SIGTERM.
// The script file is {"scenarios":[...]} with the fields of fake.Scenario
// (see providers/fake/scenario_server.go); without one, keywords in the
// last user message choose the answer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"lemo/providers/fake"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakeprovider:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fakeprovider", flag.ContinueOnError)
	flavor := fs.String("flavor", "openai", "wire protocol: ollama, openrouter, nvidia, zen or openai")
	script := fs.String("script", "", "JSON scenario file ({\"scenarios\":[...]})")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	key := fs.String("api-key", "", "require this Bearer key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("unexpected arguments: " + fmt.Sprint(fs.Args()))
	}
	var scenarios []fake.Scenario
	if *script != "" {
		var err error
		if scenarios, err = fake.LoadScript(*script); err != nil {
			return err
		}
	}
	s, err := fake.NewServer(fake.Options{Flavor: fake.Flavor(*flavor), Script: scenarios, APIKey: *key})
	if err != nil {
		return err
	}
	if err := s.Start(*addr); err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(out, "FAKE_URL=%s\n", s.URL())
	<-ctx.Done()
	return nil
}
