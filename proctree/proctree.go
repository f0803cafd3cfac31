// Package proctree starts commands in a process group of their own and ends
// the whole group: the command and whatever it started. A git that runs
// past its time, or a command `tally run` runs for an MCP client that gave
// up, must not leave children behind holding locks or pipes.
//
// proctree_unix.go serves Linux, macOS and FreeBSD (process groups and
// signals); proctree_windows.go serves Windows (a new process group, and
// the tree by parent process id, ended process by process).
package proctree

import "os/exec"

// KillGroupOnCancel makes cmd, not yet started, the first of a new process
// group, and the cancellation of its context end that whole group.
func KillGroupOnCancel(cmd *exec.Cmd) {
	NewGroup(cmd)
	cmd.Cancel = func() error { return KillGroup(cmd) }
}
