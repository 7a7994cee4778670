package folders

import "testing"

func TestRelation(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		within bool
		rel    string
	}{
		{"/a/b", "/a/b", true, "is"},
		{"/a/b/c", "/a/b", true, "is inside"},
		{"/a", "/a/b", false, "contains"},
		{"/a/bc", "/a/b", false, ""},
		{"/a/b", "/a/bc", false, ""},
		{"/x", "/", true, "is inside"},
		{"/", "/", true, "is"},
		{"/a", "", false, ""},
	} {
		if got := Within(tc.p, tc.dir); got != tc.within {
			t.Errorf("Within(%q, %q) = %v, want %v", tc.p, tc.dir, got, tc.within)
		}
		if got := Relation(tc.p, tc.dir); got != tc.rel {
			t.Errorf("Relation(%q, %q) = %q, want %q", tc.p, tc.dir, got, tc.rel)
		}
	}
}
