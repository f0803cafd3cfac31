//go:build !linux

package gitserver

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal;
// the test's cleanup still kills the server's group.
func dieWithParent(*exec.Cmd) {}
