//go:build !linux

package gitstore

import "testing"

// lockWaiters would count the requests blocked on a lock of the file at
// path; only Linux lists them (/proc/locks), so elsewhere the test that
// asks skips.
func lockWaiters(t *testing.T, path string) int {
	t.Helper()
	t.Skipf("no /proc/locks on this system to see a blocked lock of %s", path)
	return 0
}
