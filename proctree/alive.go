package proctree

// Alive reports whether pid names a running process in this process's
// process table. A process we may not signal or open is alive; a zombie
// (exited, not yet reaped by its parent) is not, where the system tells
// one apart (alive_*.go, one per system).
func Alive(pid int) bool {
	return pid > 0 && alive(pid)
}
