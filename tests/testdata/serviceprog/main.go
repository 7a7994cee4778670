// Command serviceprog is a Program for the end-to-end tests: it attaches to
// a daemon (LEMO_ADDR, LEMO_TOKEN), offers the Service "notes" and serves
// it until its stdin closes.
//
//	notes.echo {"text": "..."} → {"echo": "...", "pid": <its pid>}
//	notes.hang {}              → never answers (until the deadline)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"lemo/api"
	"lemo/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "serviceprog:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	c, err := client.Connect(ctx, client.Options{Addr: os.Getenv("LEMO_ADDR"), Token: os.Getenv("LEMO_TOKEN"), Name: "serviceprog"})
	if err != nil {
		return err
	}
	defer c.Close()
	spec := &api.ServiceSpec{Name: "notes", Description: "a test program's notes", Operations: []*api.ServiceOperation{
		{Name: "echo", Description: "echoes text", InputSchema: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			ResultSchema: []byte(`{"type":"object","required":["echo"]}`)},
		{Name: "hang", Description: "never answers"},
	}}
	err = c.RegisterService(ctx, spec, func(ctx context.Context, call client.ServiceCall) (json.RawMessage, error) {
		switch call.Operation {
		case "echo":
			var in struct{ Text string }
			if err := json.Unmarshal(call.Input, &in); err != nil {
				return nil, err
			}
			fmt.Printf("call %s %s\n", call.TaskID, call.CallID)
			return json.Marshal(map[string]any{"echo": in.Text, "pid": os.Getpid()})
		case "hang":
			fmt.Printf("hanging %s\n", call.TaskID)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("no operation %q", call.Operation)
	})
	if err != nil {
		return err
	}
	fmt.Println("registered")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}
