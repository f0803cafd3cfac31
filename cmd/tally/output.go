package main

import (
	"fmt"
	"io"

	"github.com/tally-dev/tally"
)

// printAppended is the text rendering shared by commands that append.
func printAppended(w io.Writer, ap *tally.Appended) {
	fmt.Fprintf(w, "#%d %s  (%.12s)\n", ap.Entry.Seq, ap.Summary, ap.Entry.Hash)
}

// printLease renders a granted or extended lease.
func printLease(w io.Writer, r *tally.LeaseResult) {
	printAppended(w, &r.Appended)
	l := r.Lease
	fmt.Fprintf(w, "lease: %s/%s epoch %d, expires %s, max hold %s\n", r.Wave, r.Cell, l.Epoch, l.ExpiresAt, l.MaxHoldUntil)
}

// emitAppended reports a plain appended entry.
func (a *app) emitAppended(ap *tally.Appended, err error) error {
	if err != nil {
		return err
	}
	return a.emit(ap, func(w io.Writer) { printAppended(w, ap) })
}
