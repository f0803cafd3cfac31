package tally

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// The process facts of this system, as the platform's process_*.go reads
// them: this process is alive and one that exited is not; a process table,
// where the system names one, is a lowercase UUID and a namespace number
// (FORMAT.md §5, "Holder identity"); a start time, where one is read, tells
// this process from another. It needs no git, so the Windows executable of
// the root package's tests runs it under wine.
func TestProcessFactsOfThisSystem(t *testing.T) {
	if !ProcessAlive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	gone := exec.Command(os.Args[0], "-test.run=^$")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if ProcessAlive(gone.Process.Pid) {
		t.Fatalf("process %d exited and was reaped, but is alive", gone.Process.Pid)
	}
	boot, pidNS, err := processTable()
	if err != nil {
		t.Logf("no process table here: %v", err)
		return
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(boot) || pidNS == 0 {
		t.Fatalf("process table %q %d: want a lowercase UUID and a namespace", boot, pidNS)
	}
	if again, _, _ := processTable(); again != boot {
		t.Fatalf("boot id %q, then %q", boot, again)
	}
	self := processStart(os.Getpid())
	t.Logf("boot id %s, pid_ns %d, start of this process %d", boot, pidNS, self)
	if self != 0 && processStart(gone.Process.Pid) == self {
		t.Fatalf("a gone process has this one's start time %d", self)
	}
}
