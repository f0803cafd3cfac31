package tally

import (
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/proctree"
)

// ProcessAlive reports whether pid names a running process on this host
// (proctree.Alive: a process we may not signal or open is alive; a zombie
// is not, where the system tells one apart).
func ProcessAlive(pid int) bool { return proctree.Alive(pid) }

// holderGone reports whether the holder of l is observably gone to a process
// with identity self: the lease was recorded in self's process table (host,
// boot, PID namespace), and no live process has its pid, or the one that has
// it started at another time than the holder (the pid was reused).
func holderGone(l *lease.Lease, self lease.HolderID) bool {
	h := l.Holder()
	if h.PID == 0 || !self.SameProcessTable(h) {
		return false // no holder process recorded, or not one this process can see
	}
	if !ProcessAlive(h.PID) {
		return true
	}
	if h.PIDStart == 0 {
		return false // any process at that pid may be the holder
	}
	start := processStart(h.PID)
	return start != 0 && start != h.PIDStart
}
