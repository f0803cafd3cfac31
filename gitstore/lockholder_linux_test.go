//go:build linux && !portable

package gitstore

// lockHolderKnown: /proc/locks says who holds a lock.
const lockHolderKnown = true
