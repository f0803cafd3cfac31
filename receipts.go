package tally

import "github.com/tally-dev/tally/receipt"

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
