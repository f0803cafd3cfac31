package lease

import (
	"time"

	"github.com/tally-dev/tally/chain"
)

// Candidate is a cell that a claim could take now.
type Candidate struct {
	Wave    string `json:"wave"`
	Cell    string `json:"cell"`
	Index   int    `json:"index"`
	Expired bool   `json:"expired"` // claimed, but its lease has expired
}

// Ready returns the claimable cells of one wave at time now, in plan order:
// pending cells whose deps are done, and claimed cells whose lease expired.
// With limit > 0 it stops after limit cells. Its cost is one read of the wave
// summary plus one read per claimed cell and per returned cell.
func Ready(kv chain.KV, wave string, now time.Time, limit int) ([]Candidate, error) {
	t := newTxn(kv)
	wv, err := t.wave(wave)
	if err != nil {
		return nil, err
	}
	rb, err := decodeBitmap(wv.Ready, wv.Size)
	if err != nil {
		return nil, err
	}
	hb, err := decodeBitmap(wv.Held, wv.Size)
	if err != nil {
		return nil, err
	}
	expired := map[int]bool{}
	for _, i := range hb.indexes() {
		id, err := t.cellIDAt(wave, i)
		if err != nil {
			return nil, err
		}
		c, err := t.cell(wave, id)
		if err != nil {
			return nil, err
		}
		if c.Lease != nil {
			if exp, err := chain.ParseTime(c.Lease.ExpiresAt); err == nil && now.After(exp) {
				expired[i] = true
				rb.set(i, true)
			}
		}
	}
	var out []Candidate
	for _, i := range rb.indexes() {
		id, err := t.cellIDAt(wave, i)
		if err != nil {
			return nil, err
		}
		out = append(out, Candidate{Wave: wave, Cell: id, Index: i, Expired: expired[i]})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// Next returns the first claimable cell in deterministic order (waves in the
// order they were planned, cells in plan order), or nil if none is claimable.
// With wave set, only that wave is considered.
func Next(kv chain.KV, wave string, now time.Time) (*Candidate, error) {
	waves := []string{wave}
	if wave == "" {
		p, err := ReadPlan(kv)
		if err != nil {
			return nil, err
		}
		waves = p.Waves
	}
	for _, w := range waves {
		c, err := Ready(kv, w, now, 1)
		if err != nil {
			return nil, err
		}
		if len(c) > 0 {
			return &c[0], nil
		}
	}
	return nil, nil
}

// Cells returns every cell of a wave in plan order (for views; it reads the
// whole wave).
func Cells(kv chain.KV, wave string) ([]*Cell, error) {
	t := newTxn(kv)
	wv, err := t.wave(wave)
	if err != nil {
		return nil, err
	}
	ids, err := CellIDs(kv, wv)
	if err != nil {
		return nil, err
	}
	out := make([]*Cell, len(ids))
	for i, id := range ids {
		if out[i], err = t.cell(wave, id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PathHold is a live lease on repository paths: a path lock, or the declared
// paths of a claimed cell, which count as held by the cell's holder.
type PathHold struct {
	Pattern   string `json:"pattern"`
	Actor     string `json:"actor"`
	Epoch     int64  `json:"epoch"`
	ExpiresAt string `json:"expires_at"`
	Source    string `json:"source"` // "cell W/C" or "lock"
}

// PathHolds returns the live path holds at time now.
func PathHolds(kv chain.KV, now time.Time) ([]PathHold, error) {
	p, err := ReadPlan(kv)
	if err != nil {
		return nil, err
	}
	t := newTxn(kv)
	var out []PathHold
	for _, w := range p.Waves {
		wv, err := t.wave(w)
		if err != nil {
			return nil, err
		}
		hb, err := decodeBitmap(wv.Held, wv.Size)
		if err != nil {
			return nil, err
		}
		for _, i := range hb.indexes() {
			id, err := t.cellIDAt(w, i)
			if err != nil {
				return nil, err
			}
			c, err := t.cell(w, id)
			if err != nil {
				return nil, err
			}
			if c.Lease == nil || len(c.Paths) == 0 {
				continue
			}
			if exp, err := chain.ParseTime(c.Lease.ExpiresAt); err != nil || now.After(exp) {
				continue
			}
			for _, pat := range c.Paths {
				out = append(out, PathHold{Pattern: pat, Actor: c.Lease.Actor, Epoch: c.Lease.Epoch,
					ExpiresAt: c.Lease.ExpiresAt, Source: "cell " + w + "/" + id})
			}
		}
	}
	return out, nil
}
