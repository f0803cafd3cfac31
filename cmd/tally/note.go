package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
)

func (a *app) noteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "note TEXT",
		Short: "append an annotation entry",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.appendSimple("note", lease.NoteBody{Text: argv[0]}, nil)
		},
	}
}

// appendSimple appends an entry whose body does not depend on the tip and
// reports it; extra adds command-specific fields to the JSON result.
func (a *app) appendSimple(kind string, body any, extra map[string]any) error {
	actor, err := a.actor()
	if err != nil {
		return err
	}
	l, err := a.open()
	if err != nil {
		return err
	}
	defer l.Close()
	ap, err := l.Append(actor, staticDraft(kind, body))
	if err != nil {
		return err
	}
	res := map[string]any{}
	for k, v := range extra {
		res[k] = v
	}
	r := appended(ap)
	res["entry"], res["commit"], res["summary"] = r.Entry, r.Commit, r.Summary
	return a.emit(res, func(w io.Writer) { printAppended(w, ap) })
}
