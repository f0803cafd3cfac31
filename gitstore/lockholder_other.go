//go:build !linux || portable

package gitstore

import "os"

// lockHolder is who holds the lock on f: not known here (0, -1). Linux
// tells through /proc/locks (lockholder_linux.go); the other systems have
// no way to ask about an flock or a LockFileEx lock.
func lockHolder(*os.File) (pid, uid int) { return 0, -1 }
