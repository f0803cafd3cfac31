package anchor

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/tally-dev/tally/chain"
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
	size, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return Checkpoint{}, invalid("trailer %q: bad size", v)
	}
	root, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(root) != len(chain.Hash{}) {
		return Checkpoint{}, invalid("trailer %q: bad root", v)
	}
	c := Checkpoint{Origin: f[0], Size: size}
	copy(c.Root[:], root)
	return c, nil
}
