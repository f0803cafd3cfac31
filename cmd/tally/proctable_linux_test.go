//go:build linux && !portable

package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// procTable reads, independently of tally, the process table this test
// runs in: the kernel's boot id and the inode of its PID namespace. The test
// is skipped where there is none to read.
func procTable(t testing.TB) (bootID string, pidNS uint64) {
	t.Helper()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skipf("no boot id on this host: %v", err)
	}
	var ns syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &ns); err != nil {
		t.Skipf("no PID namespace inode: %v", err)
	}
	return strings.TrimSpace(string(boot)), ns.Ino
}
