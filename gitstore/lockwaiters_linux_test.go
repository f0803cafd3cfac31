package gitstore

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// lockWaiters counts the processes' requests blocked on an flock of the
// file at path (/proc/locks lists them with "->").
func lockWaiters(t *testing.T, path string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks to see a blocked flock: %v", err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 6 && f[1] == "->" && strings.HasSuffix(f[6], fmt.Sprintf(":%d", st.Ino)) {
			n++
		}
	}
	return n
}
