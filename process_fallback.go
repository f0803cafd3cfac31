//go:build unix && !darwin && !freebsd && (!linux || portable)

package tally

import (
	"fmt"
	"runtime"
)

// The fallback where tally knows no way to name a process table: other
// unix systems, and Linux built with -tags portable, which runs the suite
// through it. Claims record no boot id, so no lease taken here can be
// reclaimed as dead, and claim --reclaim-dead is refused
// (DEAD-HOLDER-UNCHECKED) instead of guessing.

// processStart returns 0: no start time is known.
func processStart(int) uint64 { return 0 }

// processTable fails: nothing names this boot's process table.
func processTable() (string, uint64, error) {
	return "", 0, fmt.Errorf("tally names no process table on %s in this build", runtime.GOOS)
}
