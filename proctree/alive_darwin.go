package proctree

import "golang.org/x/sys/unix"

// alive: the signal probe, and kern.proc.pid's state to tell a zombie.
func alive(pid int) bool {
	if !signalProbe(pid) {
		return false
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return true // gone since the probe, or not ours to read: trust the probe
	}
	return kp.Proc.P_stat != darwinZombie
}

// darwinZombie is SZOMB, the p_stat of a process that exited and was not
// reaped (sys/proc.h).
const darwinZombie = 5
