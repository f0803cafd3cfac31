//go:build freebsd || windows

package tally

import (
	"crypto/sha256"
	"fmt"
)

// derivedBootID turns what a system says about its boot (its boot time)
// into a boot id of the form FORMAT.md §5 asks: a lowercase UUID, here a
// version 8 (RFC 9562) one whose bits are the SHA-256 of the description.
func derivedBootID(boot string) string {
	h := sha256.Sum256([]byte(boot))
	h[6] = h[6]&0x0f | 0x80 // version 8
	h[8] = h[8]&0x3f | 0x80 // the RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
