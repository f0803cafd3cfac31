//go:build darwin || freebsd || windows

package tally

// soloProcessTable is the pid_ns a claim records on a system without PID
// namespaces, where one boot has one process table (FORMAT.md §5, "Holder
// identity"). Linux's namespace inodes are never 1.
const soloProcessTable = 1
