//go:build linux && !portable

package proctree

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// alive: the signal probe, and /proc/PID/stat's state to tell a zombie.
func alive(pid int) bool {
	if !signalProbe(pid) {
		return false
	}
	fields, err := Stat(pid)
	if err != nil {
		return true // no procfs: trust the signal probe
	}
	return len(fields) == 0 || fields[0] != "Z"
}

// Stat returns the fields of /proc/PID/stat after the parenthesized
// command name (which may contain spaces): fields[0] is the state (field 3
// of proc(5)), fields[19] the start time (field 22).
func Stat(pid int) ([]string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(stat[i+1:])), nil
}
