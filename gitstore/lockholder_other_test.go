//go:build !linux || portable

package gitstore

// lockHolderKnown: this system does not say who holds a lock.
const lockHolderKnown = false
