package main

import (
	"fmt"
	"io"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/ledger"
)

// entryRef identifies an appended entry in command output.
type entryRef struct {
	Seq  uint64     `json:"seq"`
	Hash chain.Hash `json:"hash"`
}

// appendedResult is the common part of every mutating command's result.
type appendedResult struct {
	Entry   entryRef `json:"entry"`
	Commit  string   `json:"commit"`
	Summary string   `json:"summary"`
}

func appended(ap *ledger.Appended) appendedResult {
	return appendedResult{Entry: entryRef{ap.Entry.Seq, ap.Hash}, Commit: ap.Commit.String(), Summary: ap.Result.Summary}
}

// printAppended is the text rendering shared by mutating commands.
func printAppended(w io.Writer, ap *ledger.Appended) {
	fmt.Fprintf(w, "#%d %s  (%s)\n", ap.Entry.Seq, ap.Result.Summary, chain.ShortHex(ap.Hash))
}

// staticDraft builds the same entry whatever the tip.
func staticDraft(kind string, body any) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: kind, Body: body}, nil
	}
}
