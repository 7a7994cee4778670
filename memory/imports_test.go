package memory

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The memory serves the tools (tools/memorytool imports it), never the
// other way round: no file of the package, its own tests included, imports
// the tool contract.
func TestMemoryDoesNotImportTools(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		pf, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if pf.Name.Name != "memory" {
			continue // an external test package (memory_test) may wire the whole tree
		}
		for _, imp := range pf.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "lemo/tools" || strings.HasPrefix(p, "lemo/tools/") {
				t.Errorf("%s imports %s: the arrow runs tools → memory", f, p)
			}
		}
	}
}
