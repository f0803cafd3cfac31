package hooks

import "os"

// executable reports whether path is a file one may run: on Windows any
// regular file, for Windows has no execute bit (Go reports none) and Git for
// Windows runs a hook file whatever its mode.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
