//go:build unix

package hooks

import "os"

// executable reports whether path is a file one may run: a regular file
// with an execute bit.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
