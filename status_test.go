package tally_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// The status of a big plan in every state is what the rules' own readers
// say, cell by cell: each cell as lease.ReadCell reads it whole, ready
// exactly when lease.Ready lists it, claimed cells first by expiry, then
// the rest in plan order. Status reads each cell once (lease.WaveCells);
// this holds it to the answer of reading them the long way.
func TestStatusOfABigPlanAgreesWithTheCells(t *testing.T) {
	dir := testrepo.New(t)
	clk := &clock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	alice, bob := open(t, dir, "alice", clk), open(t, dir, "bob", clk)
	must(alice.Init("test/status", false))(t)
	const n = 600 // three order chunks of 256
	id := func(i int) string { return fmt.Sprintf("c%03d", i) }
	for _, wave := range []string{"first", "second"} {
		var cells []lease.PlanCell
		for i := 0; i < n; i++ {
			c := lease.PlanCell{ID: id(i)}
			if i%5 == 3 {
				c.Deps = []string{id(i - 1)} // waits for a cell that is never done
			}
			cells = append(cells, c)
		}
		must(alice.Plan(&lease.PlanBody{Wave: wave, Cells: cells}))(t)
	}
	for i := 0; i < n; i += 5 { // first: every fifth claimed, soon to expire
		must(alice.Claim(tally.ClaimOptions{Wave: "first", Cell: id(i), TTL: lease.TTLMin + i}))(t)
	}
	clk.advance(time.Duration(lease.TTLMin+n/2) * time.Second) // half of them expired
	for i := 1; i < n; i += 5 {
		must(bob.Claim(tally.ClaimOptions{Wave: "first", Cell: id(i), TTL: 600}))(t)
	}
	for i := 2; i < n; i += 25 { // failed, and some of them requeued (pending at epoch 1)
		must(bob.Claim(tally.ClaimOptions{Wave: "first", Cell: id(i), TTL: 600}))(t)
		must(bob.Fail("first", id(i), 1, "broken"))(t)
		if i%2 == 0 {
			must(bob.Requeue("first", id(i)))(t)
		}
	}
	must(bob.Claim(tally.ClaimOptions{Wave: "second", Cell: id(4), TTL: 900}))(t)
	clk.advance(time.Second)

	got, now := must2(alice.Status(""))(t)
	if want := clk.now(); !now.Equal(want) {
		t.Fatalf("status at %v, want the clock's %v", now, want)
	}
	tip := must(alice.L.Tip())(t)
	snap := must(alice.L.SnapshotAt(tip))(t)
	var want []tally.WaveStatus
	for _, wave := range must(lease.ReadPlan(snap))(t).Waves {
		wv := must(lease.ReadWave(snap, wave))(t)
		ready := map[string]bool{}
		for _, r := range must(lease.Ready(snap, wave, now, 0))(t) {
			ready[r.Cell] = true
		}
		ws := tally.WaveStatus{Wave: wave, Counts: wv.Counts}
		for _, cid := range must(lease.CellIDs(snap, wv))(t) {
			c := must(lease.ReadCell(snap, wave, cid))(t)
			cs := tally.CellStatus{Cell: c.ID, State: c.State, Epoch: c.Epoch, Ready: ready[c.ID]}
			if c.Lease != nil {
				exp := must(chain.ParseTime(c.Lease.ExpiresAt))(t)
				left := int64(exp.Sub(now) / time.Second)
				cs.Holder, cs.ExpiresAt, cs.SecondsLeft = c.Lease.Actor, c.Lease.ExpiresAt, &left
			}
			ws.Cells = append(ws.Cells, cs)
		}
		want = append(want, ws)
	}
	if len(got) != len(want) {
		t.Fatalf("status of %d waves, want %d", len(got), len(want))
	}
	for w, ws := range want {
		g := got[w]
		if g.Wave != ws.Wave || !reflect.DeepEqual(g.Counts, ws.Counts) || len(g.Cells) != len(ws.Cells) {
			t.Fatalf("wave %d: %s %v with %d rows, want %s %v with %d", w, g.Wave, g.Counts, len(g.Cells), ws.Wave, ws.Counts, len(ws.Cells))
		}
		// The rows are the cells, each once: claimed ones first, soonest
		// expiry first, and otherwise in plan order.
		index := map[string]int{}
		for i, c := range ws.Cells {
			index[c.Cell] = i
		}
		for i, row := range g.Cells {
			if x := ws.Cells[index[row.Cell]]; !reflect.DeepEqual(row, x) {
				t.Fatalf("wave %s, row %d: %+v, want %+v", ws.Wave, i, row, x)
			}
			if i == 0 {
				continue
			}
			prev := g.Cells[i-1]
			held, prevHeld := row.Holder != "", prev.Holder != ""
			switch {
			case held && !prevHeld:
				t.Fatalf("wave %s, row %d: claimed %s after unclaimed %s", ws.Wave, i, row.Cell, prev.Cell)
			case held && prevHeld && row.ExpiresAt < prev.ExpiresAt:
				t.Fatalf("wave %s, row %d: %s expires at %s, before %s above it at %s", ws.Wave, i, row.Cell, row.ExpiresAt, prev.Cell, prev.ExpiresAt)
			case held == prevHeld && row.ExpiresAt == prev.ExpiresAt && index[row.Cell] < index[prev.Cell]:
				t.Fatalf("wave %s, row %d: %s above %s, out of plan order", ws.Wave, i, prev.Cell, row.Cell)
			}
		}
	}
	// The plan covers every kind of row a status shows.
	kinds := map[string]bool{}
	for _, ws := range got {
		for _, c := range ws.Cells {
			expired := c.SecondsLeft != nil && *c.SecondsLeft < 0
			kinds[fmt.Sprintf("%s ready=%v expired=%v epoch>0=%v", c.State, c.Ready, expired, c.Epoch > 0)] = true
		}
	}
	for _, k := range []string{"pending ready=true expired=false epoch>0=false", "pending ready=false expired=false epoch>0=false",
		"pending ready=true expired=false epoch>0=true", "claimed ready=true expired=true epoch>0=true",
		"claimed ready=false expired=false epoch>0=true", "failed ready=false expired=false epoch>0=true"} {
		if !kinds[k] {
			t.Errorf("no row %q in the status (rows: %v)", k, kinds)
		}
	}
}

// must2(f())(t) is must for functions of two values and an error.
func must2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}
