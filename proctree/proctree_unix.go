//go:build unix

package proctree

import (
	"os/exec"
	"syscall"
)

// NewGroup makes cmd, not yet started, the leader of a new process group.
func NewGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// KillGroup kills, with SIGKILL, every process of the group cmd leads.
func KillGroup(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// Detach makes cmd, not yet started, outlive the process that starts it
// and its terminal: it starts a session of its own.
func Detach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}
