package tally

import (
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/receipt"
)

// ReceiptShow lists the receipts of the commit rev names (or, if it has none,
// of other commits with its tree) with their done entries, as the ledger
// views read it (in remote mode, the remote's); see receipt.Show.
func (c *Client) ReceiptShow(rev string) (*receipt.ShowResult, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	return receipt.Show(c.L, s, rev)
}

// ReceiptVerify verifies the ledger incrementally (in remote mode, the
// remote's), then checks the receipts of the commit rev names against the
// verified head; see receipt.Check.
func (c *Client) ReceiptVerify(rev string) (*receipt.VerifyResult, error) {
	rep, err := c.Verify(false)
	if err != nil {
		return nil, err
	}
	return receipt.Check(c.L, rep, rev)
}

// ReceiptExport returns the in-toto statement of a verified receipt of the
// commit rev names, the one of cell ("wave/cell") if it has several; see
// receipt.Attest.
func (c *Client) ReceiptExport(rev, cell string) (*receipt.Statement, error) {
	res, err := c.ReceiptVerify(rev)
	if err != nil {
		return nil, err
	}
	return receipt.Attest(res, cell)
}

// RepairResult is the outcome of ReceiptRepair.
type RepairResult struct {
	// Written are the note lines added: receipts of the ledger whose line
	// the local notes lacked (a done killed between its append and its
	// note, say). Empty when nothing was missing.
	Written []receipt.NoteAdd `json:"written"`
	// NotesPush is, in remote mode, what pushing the notes to the remote did.
	NotesPush *receipt.NotesPush `json:"notes_push,omitempty"`
}

// ReceiptRepair writes the git note line of every receipt in the ledger (in
// remote mode, the remote's) that refs/notes/tally lacks, in one notes
// commit, as done writes it; in remote mode it then pushes the notes the
// remote lacks, as done does. It is idempotent: a second run writes nothing.
func (c *Client) ReceiptRepair() (*RepairResult, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	missing, err := receipt.MissingNotes(c.L, s)
	if err != nil {
		return nil, err
	}
	name := c.Actor // repair needs no actor; the notes commit needs a name
	if name == "" {
		name = "tally"
	}
	who := gitstore.Ident{Name: name, Email: name, When: c.L.Now().Unix(), TZ: "+0000"}
	res := &RepairResult{Written: []receipt.NoteAdd{}}
	if len(missing) > 0 {
		added, err := receipt.AddNotes(c.L.Repo, c.L.NotesLock(), missing, who, "Notes added by 'tally receipt repair'\n")
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "write %s", receipt.NotesRef)
		}
		res.Written = append(res.Written, added...)
	}
	if c.Remote() != "" {
		res.NotesPush = c.pushNotes(c.Remote(), s.Commit, who)
	}
	return res, nil
}
