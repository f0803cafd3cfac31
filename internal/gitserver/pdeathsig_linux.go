package gitserver

import (
	"os/exec"
	"syscall"
)

// dieWithParent has Linux kill the server when the test process dies, so a
// crashed test leaves no daemon holding its port.
func dieWithParent(cmd *exec.Cmd) { cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL }
