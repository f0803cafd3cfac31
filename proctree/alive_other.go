//go:build unix && !darwin && (!linux || portable)

package proctree

// alive is the signal probe alone where tally reads no process state
// (FreeBSD, where x/sys/unix reads no kinfo_proc; other unix systems; Linux
// built with -tags portable): a zombie counts as alive until it is reaped,
// which errs on the side of the process.
func alive(pid int) bool { return signalProbe(pid) }
