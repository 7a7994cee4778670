package shell

import (
	"strings"
	"testing"
)

// chains are ways to put a command after (and before) arbitrary text:
// separators, substitutions, groups, control structures, wrappers and
// nested shells. Each is an opening and a closing piece.
var chains = [][2]string{
	{"; ", " ;"}, {" && ", " && "}, {" || ", " || "}, {" | ", " | "}, {" & ", " & "}, {"\n", "\n"}, {"\r\n", "\r\n"},
	{" $(", ") "}, {" `", "` "}, {" \"$(", ")\" "}, {" (", ") "}, {"; { ", "; } "}, {"; if true; then ", "; fi "},
	{"; while true; do ", "; done "}, {" <(", ") "}, {" >(", ") "}, {"; sudo ", " ;"}, {"; env A=1 ", " ;"},
	{" | xargs ", " ;"}, {"; sh -c '", "' ;"}, {"; bash -c \"", "\" ;"}, {"; eval '", "' ;"}, {"; ! ", " ;"},
	{" ${x:-$(", ")} "}, {" $(( $(", ") )) "}, {"; f() { ", "; }; f "}, {" <<EOF\n", "\nEOF\n"}, {" # ", "\n"},
	{"; exec ", "\n"}, {"; time ", "\n"}, {"; nohup ", " &\n"}, {"; timeout 5 ", "\n"}, {"; command ", "\n"},
}

// denied are spellings of denied commands (rules "rm -rf" and "shutdown").
var denied = []string{
	"rm -rf /", "/bin/rm -rf /", "\\rm -rf /", "r''m -rf /", "\"rm\" \"-rf\" /", "'rm' '-rf' x", "rm -rf",
	"shutdown -h now", "/sbin/shutdown now", "sh\\\nutdown now", "rm${IFS}-rf /",
}

// FuzzPolicy checks that a denied command stays denied whatever text is put
// around it and however it is chained, under the most permissive policy
// otherwise (allow everything by default and by rule), and that no command
// line makes the policy panic or answer without a reason.
func FuzzPolicy(f *testing.F) {
	f.Add("ls", "echo done", uint8(0), uint8(0))
	f.Add("echo '", "'", uint8(7), uint8(2))
	f.Add("cat <<X", "X", uint8(26), uint8(1))
	f.Add("a\\", "b", uint8(3), uint8(4))
	f.Add("$(", ")", uint8(12), uint8(5))
	f.Add("# ", "", uint8(27), uint8(3))
	f.Add(strings.Repeat("true;", 300), "", uint8(1), uint8(6))
	f.Add("x=`", "`", uint8(8), uint8(9))
	f.Add("\"", "", uint8(9), uint8(10))
	r := compileRules(Policy{Deny: []string{"rm -rf", "shutdown"}, Allow: []string{"*"}, Default: Allow})
	f.Fuzz(func(t *testing.T, prefix, suffix string, chain, spelling uint8) {
		// Arbitrary text alone: no panic, a decision and a reason.
		for _, s := range []string{prefix, suffix} {
			v := r.check(s)
			if v.Reason == "" || (v.Decision != Allow && v.Decision != Ask && v.Decision != Deny) {
				t.Fatalf("check(%q) = %+v", s, v)
			}
		}
		// A trailing backslash would join the prefix's last word to the
		// command (a different command, not a bypass); a NUL is denied
		// anyway.
		prefix = strings.TrimRight(prefix, "\\")
		c := chains[int(chain)%len(chains)]
		d := denied[int(spelling)%len(denied)]
		cmd := prefix + c[0] + d + c[1] + suffix
		if v := r.check(cmd); v.Decision != Deny {
			t.Fatalf("check(%q) = %s (%s); want deny", cmd, v.Decision, v.Reason)
		}
	})
}
