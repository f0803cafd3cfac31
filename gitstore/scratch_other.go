//go:build !linux || portable

package gitstore

// pidNamespace: one process table per host (no PID namespaces tally
// reads), which the host name names.
func pidNamespace() (string, bool) { return "", true }
