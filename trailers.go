package tally

import (
	"strings"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// StampCommitMessage adds (or replaces) a Tally-Checkpoint trailer with the
// checkpoint of the local ledger tip (whatever the source: a commit must
// never wait on a server) to a commit message file: what the
// commit-msg hook does. Without a ledger it does nothing. git places the
// trailer (git interpret-trailers), so its conventions hold.
func (c *Client) StampCommitMessage(file string) (*anchor.Checkpoint, error) {
	s, err := c.L.Head()
	if errs.Is(err, errs.NotInitialized) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cp := anchor.FromMeta(s.Meta)
	if _, err := gitstore.RunGit(c.repoDir(), "interpret-trailers", "--in-place", "--if-exists", "replace",
		"--trailer", anchor.TrailerKey+": "+cp.Trailer(), file); err != nil {
		return nil, errs.New(errs.Internal, "%v", err)
	}
	return &cp, nil
}

// TrailerCheck is one Tally-Checkpoint trailer found in code history.
type TrailerCheck struct {
	Commit     string            `json:"commit"`
	Checkpoint anchor.Checkpoint `json:"checkpoint"`
}

// CheckTrailers checks every Tally-Checkpoint trailer of this ledger's origin
// in the history of rev against the ledger at commit: each must name a
// prefix of it (else FORK-DETECTED or ROLLBACK-DETECTED, naming the code
// commit). Trailers of other ledgers are skipped.
func (c *Client) CheckTrailers(ledgerCommit gitstore.ObjectID, rev string) ([]TrailerCheck, error) {
	s, err := c.L.SnapshotAt(ledgerCommit)
	if err != nil {
		return nil, err
	}
	out, err := gitstore.RunGit(c.repoDir(), "log", "--format=%H%x1f%(trailers:key="+anchor.TrailerKey+",valueonly,separator=%x1d)%x1e", rev, "--")
	if err != nil {
		return nil, errs.New(errs.Usage, "git log %s: %v", rev, err)
	}
	checks := []TrailerCheck{}
	for _, rec := range strings.Split(string(out), "\x1e") {
		commit, values, ok := strings.Cut(strings.TrimSpace(rec), "\x1f")
		if !ok || strings.TrimSpace(values) == "" {
			continue
		}
		for _, v := range strings.Split(values, "\x1d") {
			cp, err := anchor.ParseTrailer(strings.TrimSpace(v))
			if err != nil {
				return nil, errs.From(err).With("commit", commit)
			}
			if cp.Origin != s.Meta.Origin {
				continue
			}
			if _, err := anchor.Check(s, s.Meta, cp); err != nil {
				e := errs.From(err)
				e.Message = "commit " + commit + ": " + e.Message
				return nil, e.With("commit", commit)
			}
			checks = append(checks, TrailerCheck{Commit: commit, Checkpoint: cp})
		}
	}
	return checks, nil
}
