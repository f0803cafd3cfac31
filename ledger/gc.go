package ledger

import (
	"runtime/debug"
	"sync"
)

// gcHold counts the long operations running that need the garbage collector.
var gcHold struct {
	sync.Mutex
	n    int
	prev int // the GC percent to restore when the last one ends
}

// collectGarbage turns the garbage collector on (GOGC=100) until the
// returned function is called, and returns it. The tally command keeps the
// collector off, so that commands of a few milliseconds do not pay for it;
// an operation whose work grows with the ledger (replaying thousands of
// entries) would otherwise grow the heap with all its garbage up to the
// process's memory limit. Calls may overlap: the setting in force before
// the first is restored when the last ends.
func collectGarbage() (end func()) {
	gcHold.Lock()
	if gcHold.n == 0 {
		gcHold.prev = debug.SetGCPercent(100)
	}
	gcHold.n++
	gcHold.Unlock()
	return func() {
		gcHold.Lock()
		if gcHold.n--; gcHold.n == 0 {
			debug.SetGCPercent(gcHold.prev)
		}
		gcHold.Unlock()
	}
}

// largeEntry is the size of entry bytes from which building or checking the
// entry collects garbage: about 2,000 plan cells, whose rules and tree
// writes allocate some kilobytes per cell.
const largeEntry = 64 << 10
