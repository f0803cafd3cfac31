package proctree

import (
	"errors"
	"os/exec"
	"syscall"
	"unsafe"

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
// records them: by parent process id (what taskkill /T follows; wine's
// taskkill does not). A process counts as a child only if it was created
// after its recorded parent, since a parent's id may since name another
// process. The command itself is killed even if the walk fails.
func KillGroup(cmd *exec.Cmd) error {
	tree, walkErr := descendants(uint32(cmd.Process.Pid))
	for _, pid := range tree {
		if h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, pid); err == nil {
			windows.TerminateProcess(h, 1)
			windows.CloseHandle(h)
		}
	}
	return errors.Join(cmd.Process.Kill(), walkErr)
}

// descendants lists the processes root started, and theirs, from one
// snapshot of the process table.
func descendants(root uint32) ([]uint32, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(snap)
	children := map[uint32][]uint32{}
	e := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		if e.ProcessID != e.ParentProcessID {
			children[e.ParentProcessID] = append(children[e.ParentProcessID], e.ProcessID)
		}
	}
	var tree []uint32
	for queue := []uint32{root}; len(queue) > 0; queue = queue[1:] {
		parentStart, ok := created(queue[0])
		if !ok {
			continue // gone: whatever names it as parent is not its child
		}
		for _, c := range children[queue[0]] {
			if start, ok := created(c); ok && start >= parentStart {
				tree = append(tree, c)
				queue = append(queue, c)
			}
		}
	}
	return tree, nil
}

// created is pid's creation time, in 100 ns units since 1601.
func created(pid uint32) (uint64, bool) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err != nil {
		return 0, false
	}
	defer windows.CloseHandle(h)
	var c, x, k, u windows.Filetime
	if windows.GetProcessTimes(h, &c, &x, &k, &u) != nil {
		return 0, false
	}
	return uint64(c.HighDateTime)<<32 | uint64(c.LowDateTime), true
}

// Detach makes cmd, not yet started, outlive the process that starts it
// and its console: a new process group with no console of its own.
func Detach(cmd *exec.Cmd) {
	NewGroup(cmd)
	cmd.SysProcAttr.CreationFlags |= windows.DETACHED_PROCESS
}
