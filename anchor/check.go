package anchor

import (
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// Consistency is the outcome of a successful Check: the checkpoint's log is
// a prefix of the ledger, as Proof (a verified RFC 9162 consistency proof
// from the checkpoint's size to the ledger's) shows.
type Consistency struct {
	Checkpoint Checkpoint   `json:"checkpoint"`
	LedgerSize uint64       `json:"ledger_size"`
	LedgerRoot chain.Hash   `json:"ledger_root"`
	Proof      []chain.Hash `json:"proof"`
}

// Check checks a checkpoint against the ledger that m describes and whose
// Merkle tiles kv holds (a ledger snapshot), reading O(log n) tiles:
//
//   - another origin is CHECKPOINT-INVALID;
//   - a checkpoint larger than the ledger is ROLLBACK-DETECTED: the ledger
//     lost entries that the checkpoint saw (it cannot tell a rollback from a
//     rollback followed by a fork);
//   - a checkpoint whose root is not the root of the ledger's first size
//     entries is FORK-DETECTED.
//
// The errors carry the details checkpoint_size and ledger_size.
func Check(kv chain.KV, m *chain.Meta, c Checkpoint) (*Consistency, error) {
	with := func(e *errs.Error) *errs.Error {
		return e.With("checkpoint_size", c.Size).With("ledger_size", m.Size)
	}
	if c.Origin != m.Origin {
		return nil, with(errs.New(errs.CheckpointInvalid, "checkpoint is of log %q, the ledger is %q", c.Origin, m.Origin))
	}
	if c.Size > m.Size {
		return nil, with(errs.New(errs.RollbackDetected, "ledger has %d entries, a checkpoint saw %d", m.Size, c.Size))
	}
	r := chain.TileNodeReader(kv, m.Size)
	root, err := chain.RootFromReader(r, c.Size)
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "Merkle tiles")
	}
	if root != c.Root {
		return nil, with(errs.New(errs.ForkDetected, "the ledger's first %d entries have root %s, the checkpoint records %s: the ledger and the checkpoint's log have diverged",
			c.Size, root, c.Root))
	}
	proof, err := chain.ConsistencyProof(r, c.Size, m.Size)
	if err == nil {
		err = chain.VerifyConsistency(c.Size, m.Size, c.Root, m.Root, proof)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "Merkle tiles disagree with the chain meta")
	}
	return &Consistency{Checkpoint: c, LedgerSize: m.Size, LedgerRoot: m.Root, Proof: proof}, nil
}
