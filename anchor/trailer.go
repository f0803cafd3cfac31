package anchor

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// TrailerKey is the git trailer that makes a code commit vouch for the
// ledger: the checkpoint (origin, size, Merkle root) of the ledger when the
// commit was written. Verify checks such trailers against the ledger, so a
// code history and a ledger history can each expose a rewrite of the other.
const TrailerKey = "Tally-Checkpoint"

// Trailer formats a checkpoint as the value of a Tally-Checkpoint trailer:
// "<origin> <size> <base64 root>" (the checkpoint body on one line).
func (c Checkpoint) Trailer() string {
	return fmt.Sprintf("%s %d %s", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseTrailer parses a Tally-Checkpoint trailer value.
func ParseTrailer(v string) (Checkpoint, error) {
	f := strings.Fields(v)
	if len(f) != 3 {
		return Checkpoint{}, invalid("trailer %q is not \"<origin> <size> <root>\"", v)
	}
	size, ok := parseDecimal(f[1])
	if !ok {
		return Checkpoint{}, invalid("trailer %q: bad size", v)
	}
	root, ok := parseHash64(f[2])
	if !ok {
		return Checkpoint{}, invalid("trailer %q: bad root", v)
	}
	return Checkpoint{Origin: f[0], Size: size, Root: root}, nil
}
