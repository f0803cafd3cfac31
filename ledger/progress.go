package ledger

import "sync"

// Progress is told how far a long operation has come: done of total units of
// the step named by what: "verify" and "rebuild" count entries, "write" the
// objects of one large append, "gc" the packs of one merging round. Within a
// step done only grows and the last call has done == total; a step of no
// units makes no call, and a new step (another what, or gc's next round)
// starts from a smaller done. Calls are serialized, so the function needs no
// locking of its own, and come every progressEvery units (plus once at the
// end), never per unit, so the hot loops stay fast whatever it costs. The ledger knows nothing about
// terminals: the command line decides whether and how to show it.
type Progress func(what string, done, total int)

// progressEvery is how many units pass between two calls of a Progress.
const progressEvery = 256

// minProgressWrite is the fewest objects an append must write for its write
// to be a step of its own.
const minProgressWrite = 4096

// counted is the count a loop adds to its meter after its unit i (from 0) of
// n: progressEvery at every progressEvery-th unit, the rest at the last one,
// and 0 in between.
func counted(i, n int) int {
	switch {
	case (i+1)%progressEvery == 0:
		return progressEvery
	case i+1 == n:
		return n % progressEvery
	}
	return 0
}

// meter counts one step's units for a Progress, from any number of
// goroutines, and tells it when the count crosses a multiple of
// progressEvery or reaches the total, so parallel loops adding their own
// remainders do not multiply the calls. A nil *meter counts nothing, so
// callers need no check.
type meter struct {
	mu          sync.Mutex
	p           Progress
	what        string
	done, total int
}

// meter starts counting a step of total units; nil without a Progress or
// without units.
func (l *Ledger) meter(what string, total int) *meter {
	if l.Progress == nil || total <= 0 {
		return nil
	}
	return &meter{p: l.Progress, what: what, total: total}
}

// add records n more units done and tells the Progress if a call is due.
func (m *meter) add(n int) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.done
	m.done = min(m.done+n, m.total)
	if m.done/progressEvery > was/progressEvery || m.done == m.total && was < m.total {
		m.p(m.what, m.done, m.total)
	}
}
