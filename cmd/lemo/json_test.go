package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// dispatchedCommands reads the command names of run's dispatch in main.go,
// so that a command added there is in the tests below without more ado.
func dispatchedCommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		fd, ok := n.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "run" {
			return true
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, e := range cc.List {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					names = append(names, s)
				}
			}
			return true
		})
		return false
	})
	if len(names) < 15 {
		t.Fatalf("found the commands %v in main.go's run: too few, has the dispatch changed shape?", names)
	}
	return names
}

// Every command of the dispatch takes --json (docs/json.md; lemo serve
// logs and is excepted), and with --json a bad flag is one JSON error on
// stderr with the code usage and exit status 2, no usage text.
func TestEveryCommandTakesJSON(t *testing.T) {
	except := map[string]bool{"serve": true, "help": true, "-h": true, "--help": true}
	t.Setenv("LEMO_DATA", t.TempDir()) // no daemon there: nothing is reached
	for _, cmd := range dispatchedCommands(t) {
		if except[cmd] {
			continue
		}
		t.Run(cmd, func(t *testing.T) {
			var help bytes.Buffer
			if err := run(context.Background(), []string{cmd, "-h"}, &help, &help); err != nil {
				t.Fatalf("lemo %s -h: %v", cmd, err)
			}
			if !strings.Contains(help.String(), "  -json") {
				t.Fatalf("lemo %s -h lists no --json:\n%s", cmd, help.String())
			}
			args := []string{cmd, "--json", "--bogus"}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, &stdout, &stderr)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Fatalf("lemo %s --json --bogus: %v, want a usage error (exit 2)", cmd, err)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Fatalf("lemo %s --json --bogus printed more than the JSON error: stdout %q, stderr %q", cmd, stdout.String(), stderr.String())
			}
			var out bytes.Buffer
			reportError(&out, args, err)
			var e struct{ Code, Message string }
			if json.Unmarshal(out.Bytes(), &e) != nil || e.Code != "usage" || !strings.Contains(e.Message, "bogus") {
				t.Fatalf("lemo %s --json --bogus: the error %q, want one JSON object with code usage", cmd, out.String())
			}
		})
	}
}
