// Package names holds the forms of the names Lemo stores and checks in
// more than one place (the store, the config, the gateway), so that each
// has one rule and one wording.
package names

// OwnerForm says what an owner name may be, for error messages.
const OwnerForm = "1 to 64 characters of A-Z, a-z, 0-9, '_', '-', '.' or '@'"

// TaskIDForm says what a Task id may be, for error messages.
const TaskIDForm = "1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'"

// Owner reports whether s has the form of an owner name (OwnerForm).
func Owner(s string) bool { return word(s, 64, true) }

// TaskID reports whether s has the form of a Task id (TaskIDForm).
func TaskID(s string) bool { return word(s, 64, false) }

// word reports whether s is 1 to max characters of [0-9A-Za-z_-], and
// with extra also '.' and '@'.
func word(s string, max int, extra bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '-':
		case extra && (c == '.' || c == '@'):
		default:
			return false
		}
	}
	return true
}
