// Package folders relates absolute, clean paths to folders: whether a path
// is a folder or lies inside it, and how two paths overlap. It looks at the
// paths only; resolving symlinks first is the caller's part.
package folders

import (
	"path/filepath"
	"strings"
)

// Within reports whether p is dir or a path inside it. Both are absolute
// and clean; "/" contains every path, and "" none.
func Within(p, dir string) bool {
	switch {
	case dir == "":
		return false
	case p == dir || dir == "/":
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// Relation says how p relates to dir: "is", "is inside", "contains", or ""
// when they are apart or dir is "".
func Relation(p, dir string) string {
	switch {
	case dir == "":
		return ""
	case p == dir:
		return "is"
	case Within(p, dir):
		return "is inside"
	case Within(dir, p):
		return "contains"
	}
	return ""
}
