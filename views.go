package tally

import (
	"encoding/json"
	"runtime"
	"sort"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// CellStatus is one cell in a status view.
type CellStatus struct {
	Cell        string `json:"cell"`
	State       string `json:"state"`
	Epoch       int64  `json:"epoch"`
	Holder      string `json:"holder,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	SecondsLeft *int64 `json:"seconds_left,omitempty"`
	Ready       bool   `json:"ready"`
}

// WaveStatus is one wave in a status view.
type WaveStatus struct {
	Wave   string         `json:"wave"`
	Counts map[string]int `json:"counts"`
	Cells  []CellStatus   `json:"cells"`
}

// Status lists the cells of one wave (all waves if wave is ""): claimed cells
// first, the soonest to expire at the top, then the rest in plan order.
func (c *Client) Status(wave string) ([]WaveStatus, time.Time, error) {
	s, err := c.head()
	if err != nil {
		return nil, time.Time{}, err
	}
	now := c.L.EntryTime(s)
	waves, err := c.waves(s, wave)
	if err != nil {
		return nil, now, err
	}
	more, err := c.readers(s)
	if err != nil {
		return nil, now, err
	}
	out := []WaveStatus{}
	for _, w := range waves {
		wv, cells, err := lease.WaveCells(s, w, now, more...)
		if err != nil {
			return nil, now, err
		}
		ws := WaveStatus{Wave: w, Counts: wv.Counts, Cells: make([]CellStatus, 0, len(cells))}
		for _, cl := range cells {
			cs := CellStatus{Cell: cl.ID, State: cl.State, Epoch: cl.Epoch, Ready: cl.Ready}
			if cl.Lease != nil {
				cs.Holder, cs.ExpiresAt = cl.Lease.Actor, cl.Lease.ExpiresAt
				if t, err := chain.ParseTime(cl.Lease.ExpiresAt); err == nil {
					left := int64(t.Sub(now) / time.Second)
					cs.SecondsLeft = &left
				}
			}
			ws.Cells = append(ws.Cells, cs)
		}
		sort.SliceStable(ws.Cells, func(i, j int) bool {
			ci, cj := ws.Cells[i], ws.Cells[j]
			if (ci.Holder != "") != (cj.Holder != "") {
				return ci.Holder != ""
			}
			return ci.ExpiresAt < cj.ExpiresAt
		})
		out = append(out, ws)
	}
	return out, now, nil
}

// readers opens further readers of snapshot s's state, one for each core
// but the first, for the views that read a big wave's cells in parallel
// (lease.WaveCells): a snapshot's tree is not safe for concurrent use, the
// object database under it is.
func (c *Client) readers(s *ledger.Snapshot) ([]chain.KV, error) {
	var more []chain.KV
	for range runtime.GOMAXPROCS(0) - 1 {
		r, err := c.L.SnapshotAt(s.Commit)
		if err != nil {
			return nil, err
		}
		more = append(more, r)
	}
	return more, nil
}

func (c *Client) waves(s *ledger.Snapshot, wave string) ([]string, error) {
	if wave != "" {
		return []string{wave}, nil
	}
	p, err := lease.ReadPlan(s)
	if err != nil {
		return nil, err
	}
	return p.Waves, nil
}

// Next lists the cells claimable now, in the order claim --next takes them.
func (c *Client) Next(wave string) ([]lease.Candidate, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	waves, err := c.waves(s, wave)
	if err != nil {
		return nil, err
	}
	out := []lease.Candidate{}
	for _, w := range waves {
		r, err := lease.Ready(s, w, c.L.EntryTime(s), 0)
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	return out, nil
}

// HistoryItem is one entry in a cell's history.
type HistoryItem struct {
	Seq   uint64          `json:"seq"`
	TS    string          `json:"ts"`
	Actor string          `json:"actor"`
	Kind  chain.Kind      `json:"kind"`
	Body  json.RawMessage `json:"body"`
}

// CellView is a cell with its history.
type CellView struct {
	Cell    *lease.Cell   `json:"cell"`
	History []HistoryItem `json:"history"`
}

// Show returns a cell, its lease and its history.
func (c *Client) Show(wave, cell string) (*CellView, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	cl, err := lease.ReadCell(s, wave, cell)
	if err != nil {
		return nil, err
	}
	v := &CellView{Cell: cl, History: []HistoryItem{}}
	for _, seq := range cl.History {
		e, _, _, err := s.Entry(seq)
		if err != nil {
			return nil, err
		}
		v.History = append(v.History, HistoryItem{Seq: e.Seq, TS: e.TS, Actor: e.Actor, Kind: e.Kind, Body: e.Body})
	}
	return v, nil
}

// Log returns the last n entries, newest first (all with n <= 0).
func (c *Client) Log(n int, f ledger.LogFilter) ([]ledger.LogEntry, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	return c.L.LogFrom(s.Commit, n, f)
}

// Verify verifies the ledger (incrementally unless full): the local one, or
// in remote mode the remote's.
func (c *Client) Verify(full bool) (*ledger.Report, error) { return c.src.Verify(full) }

// LiveLease returns the actor's live lease on a cell at epoch (0: the cell's
// current epoch): what `tally run` records evidence under. It answers by
// lease.CheckHolder at the time an entry appended now would carry, so run
// refuses exactly where renew would.
func (c *Client) LiveLease(wave, cell string, epoch int64) (*lease.Lease, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	cl, err := lease.ReadCell(s, wave, cell)
	if err != nil {
		return nil, err
	}
	if epoch == 0 {
		epoch = cl.Epoch
	}
	b := lease.EpochBody{CellRef: lease.CellRef{Wave: wave, Cell: cell}, Epoch: epoch}
	if err := lease.CheckHolder(cl, b, c.Actor, true, c.L.EntryTime(s)); err != nil {
		return nil, err
	}
	return cl.Lease, nil
}

// RecordEvidence stores evidence of a run under the actor's live lease until
// a receipt takes it.
func (c *Client) RecordEvidence(wave, cell string, ev lease.Evidence) error {
	return receipt.SaveEvidence(c.L.Files, wave, cell, ev)
}
