// Package refname decides which git ref names tally accepts. It is pure (no
// I/O), so the lease rules can use it without depending on gitstore.
package refname

import "strings"

// Valid reports whether name is a full ref name tally accepts: it starts
// with refs/ and git check-ref-format accepts it (no empty, dot-led or
// .lock component, no control characters, none of ` ~^:?*[\`, no "..", no
// "@{").
func Valid(name string) bool {
	if !strings.HasPrefix(name, "refs/") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 { // git refuses control characters; they would break packed-refs lines
			return false
		}
	}
	return !strings.ContainsAny(name, " ~^:?*[\\\x7f") && !strings.Contains(name, "..") && !strings.Contains(name, "@{")
}
