package proctree

import (
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/windows"
)

// NewGroup makes cmd, not yet started, the root of a new process group
// (CREATE_NEW_PROCESS_GROUP: a Ctrl+C at the console no longer reaches it).
func NewGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
}

// KillGroup ends cmd's process and every process it started, as Windows
// knows them by their parent: taskkill /T /F. Should taskkill fail, the
// command itself is killed still.
func KillGroup(cmd *exec.Cmd) error {
	tree := exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(cmd.Process.Pid))
	if err := tree.Run(); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}

// Detach makes cmd, not yet started, outlive the process that starts it
// and its console: a new process group with no console of its own.
func Detach(cmd *exec.Cmd) {
	NewGroup(cmd)
	cmd.SysProcAttr.CreationFlags |= windows.DETACHED_PROCESS
}
