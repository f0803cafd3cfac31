package tally

import (
	"slices"
	"sort"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// EditCheck decides whether the client's actor may change paths
// (repository-relative) now, by lease.EditCheck on the verified head, paths
// and patterns compared case folded where the repository's core.ignorecase
// says the file system ignores case (FORMAT.md §9c). A ledger that does not
// verify is its integrity error.
func (c *Client) EditCheck(paths []string) (*lease.EditDecision, error) {
	if err := c.needActor(); err != nil {
		return nil, err
	}
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	return lease.EditCheck(s, c.Actor, paths, c.L.EntryTime(s), c.L.Repo.IgnoreCase())
}

// RenewAging renews the holds EditCheck found aging, each keeping its TTL,
// in one append: lock entries for the locks (one per TTL and per
// lease.MaxLockPatterns patterns), one renew entry per cell.
func (c *Client) RenewAging(aging []lease.AgingHold) error {
	if len(aging) == 0 {
		return nil
	}
	byTTL := map[int][]lease.AgingHold{}
	var builds []ledger.BuildFunc
	for _, h := range aging {
		if ref, isCell := h.Cell(); isCell {
			body := lease.RenewBody{EpochBody: lease.EpochBody{CellRef: ref, Epoch: h.Epoch}, TTL: h.TTLSeconds}
			builds = append(builds, draft(chain.KindRenew, body))
			continue
		}
		byTTL[h.TTLSeconds] = append(byTTL[h.TTLSeconds], h)
	}
	ttls := make([]int, 0, len(byTTL))
	for ttl := range byTTL {
		ttls = append(ttls, ttl)
	}
	sort.Ints(ttls)
	for _, ttl := range ttls {
		locks := byTTL[ttl]
		sort.Slice(locks, func(i, j int) bool { return locks[i].Pattern < locks[j].Pattern })
		for part := range slices.Chunk(locks, lease.MaxLockPatterns) {
			b := lease.LockBody{TTL: ttl}
			for _, l := range part {
				b.Patterns, b.Epochs = append(b.Patterns, l.Pattern), append(b.Epochs, l.Epoch)
			}
			builds = append(builds, draft(chain.KindLock, b))
		}
	}
	_, err := c.appendBatch(builds)
	return err
}

// draft builds a fixed entry.
func draft(kind chain.Kind, body any) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: kind, Body: body}, nil
	}
}

// SessionView is what an agent is told when its session starts: its live
// path holds and the cells it could claim next.
type SessionView struct {
	Actor string            `json:"actor"`
	Holds []lease.PathHold  `json:"holds"`
	Ready []lease.Candidate `json:"ready"`
	More  bool              `json:"more"` // more cells are ready than Ready lists
}

// sessionReady is how many ready cells a session's start lists.
const sessionReady = 10

// SessionStart returns the actor's live holds and up to ten ready cells.
func (c *Client) SessionStart() (*SessionView, error) {
	if err := c.needActor(); err != nil {
		return nil, err
	}
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	d, err := lease.EditCheck(s, c.Actor, nil, c.L.EntryTime(s), false)
	if err != nil {
		return nil, err
	}
	v := &SessionView{Actor: c.Actor, Holds: d.Holds, Ready: []lease.Candidate{}}
	waves, err := c.waves(s, "")
	if err != nil {
		return nil, err
	}
	for _, w := range waves {
		r, err := lease.Ready(s, w, c.L.EntryTime(s), sessionReady+1-len(v.Ready))
		if err != nil {
			return nil, err
		}
		v.Ready = append(v.Ready, r...)
		if len(v.Ready) > sessionReady {
			v.Ready, v.More = v.Ready[:sessionReady], true
			break
		}
	}
	return v, nil
}

// SessionEnd ends an agent's session as the policy's session_end says:
// leaves its leases to expire (nothing released), or releases its live
// path locks and the claimed cells whose paths it holds, in one append.
func (c *Client) SessionEnd() (released []lease.PathHold, err error) {
	if err := c.needActor(); err != nil {
		return nil, err
	}
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	p, err := lease.ReadPolicy(s)
	if err != nil || !p.ReleasesAtSessionEnd() {
		return nil, err
	}
	d, err := lease.EditCheck(s, c.Actor, nil, c.L.EntryTime(s), false)
	if err != nil {
		return nil, err
	}
	var builds []ledger.BuildFunc
	var locks []lease.PathHold // in pattern order, as holds list them
	var cells []lease.CellRef
	for _, h := range d.Holds {
		ref, isCell := h.Cell()
		switch {
		case !isCell:
			locks = append(locks, h)
		case slices.Contains(cells, ref):
			continue
		default:
			cells = append(cells, ref)
			builds = append(builds, draft(chain.KindRelease, lease.EpochBody{CellRef: ref, Epoch: h.Epoch}))
		}
		released = append(released, h)
	}
	for part := range slices.Chunk(locks, lease.MaxLockPatterns) {
		var unlock lease.UnlockBody
		for _, h := range part {
			unlock.Patterns, unlock.Epochs = append(unlock.Patterns, h.Pattern), append(unlock.Epochs, h.Epoch)
		}
		builds = append(builds, draft(chain.KindUnlock, unlock))
	}
	if len(builds) == 0 {
		return nil, nil
	}
	if _, err := c.appendBatch(builds); err != nil {
		return nil, err
	}
	return released, nil
}
