// Package receipt binds finished work to git commits: evidence of commands run
// under a lease, the receipt entry that `tally done` appends, the git note that
// points from a commit to its receipt, receipt verification that survives
// rebases, and in-toto export.
package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
)

// SaveEvidence stores one run's evidence for a lease. Pending evidence waits
// in the clone's local files (shared by all worktrees, never pushed) until a
// receipt takes it: one file per run in local.Evidence(wave, cell, epoch).
func SaveEvidence(local gitstore.LocalPaths, wave, cell string, ev lease.Evidence) error {
	dir := local.Evidence(wave, cell, ev.Epoch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	// Written under a temporary name and renamed, so PendingEvidence never
	// reads a run that is half written.
	f, err := os.CreateTemp(dir, ".run-*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		unique := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f.Name()), ".run-"), ".tmp")
		err = os.Rename(f.Name(), filepath.Join(dir, "run-"+unique+".json"))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// PendingEvidence returns the stored evidence of a lease, oldest first, and
// the files it was read from (for ClearEvidence).
func PendingEvidence(local gitstore.LocalPaths, wave, cell string, epoch int64) ([]lease.Evidence, []string, error) {
	dir := local.Evidence(wave, cell, epoch)
	names, err := filepath.Glob(filepath.Join(dir, "run-*.json"))
	if err != nil {
		return nil, nil, err
	}
	var out []lease.Evidence
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, nil, err
		}
		var ev lease.Evidence
		if err := json.Unmarshal(b, &ev); err != nil {
			return nil, nil, errs.Wrap(errs.Corrupt, err, "pending evidence %s (remove the file to drop that run)", n)
		}
		out = append(out, ev)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt < out[j].StartedAt })
	return out, names, nil
}

// ClearEvidence removes the evidence files a receipt took (a run recorded
// since stays pending), and the lease's directory once it is empty.
func ClearEvidence(files []string) {
	for _, f := range files {
		os.Remove(f)
	}
	if len(files) > 0 {
		os.Remove(filepath.Dir(files[0])) // fails, harmlessly, while not empty
	}
}

// StreamDigest hashes and counts a stream as it passes through.
type StreamDigest struct {
	n      int64
	b3, s2 hash.Hash
}

// NewStreamDigest returns an empty digest.
func NewStreamDigest() *StreamDigest {
	return &StreamDigest{b3: blake3.New(), s2: sha256.New()}
}

func (d *StreamDigest) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	d.b3.Write(p)
	d.s2.Write(p)
	return len(p), nil
}

// Digest returns the size and digests so far.
func (d *StreamDigest) Digest() lease.Digest {
	return lease.Digest{Size: d.n, BLAKE3: hex.EncodeToString(d.b3.Sum(nil)), SHA256: hex.EncodeToString(d.s2.Sum(nil))}
}

var _ io.Writer = (*StreamDigest)(nil)
