package tally_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// A dead holder is reclaimed only where tally names the process table:
// there a claim records it (pid_ns and a lowercase-UUID boot id, which the
// rules check), and claim --reclaim-dead takes the lease once the holder's
// process is gone. Where tally names none (a build with -tags portable, a
// FreeBSD jail, another unix), the claim records none and --reclaim-dead is
// refused with DEAD-HOLDER-UNCHECKED, writing nothing.
func TestReclaimDeadHolderWhereTheSystemTells(t *testing.T) {
	gone := exec.Command(os.Args[0], "-test.run=^$") // exits at once, and is reaped
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir := testrepo.New(t)
	clk := &clock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	alice, bob := open(t, dir, "alice", clk), open(t, dir, "bob", clk)
	must(alice.Init("test/dead", false))(t)
	must(alice.Plan(&lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "a"}}}))(t)
	g := must(alice.Claim(tally.ClaimOptions{Wave: "w", Cell: "a", TTL: 600, PID: gone.Process.Pid}))(t)
	tip := must(alice.L.Tip())(t)

	res, err := bob.Claim(tally.ClaimOptions{Wave: "w", Cell: "a", ReclaimDead: true})
	boot, pidNS, tableErr := tally.ProcessTable()
	if tableErr != nil {
		t.Logf("this system names no process table: %v", tableErr)
		if g.Lease.BootID != "" || g.Lease.PIDNS != 0 {
			t.Fatalf("lease records a process table (%q, %d) the system does not name", g.Lease.BootID, g.Lease.PIDNS)
		}
		if code(err) != string(errs.DeadHolderUnchecked) {
			t.Fatalf("claim --reclaim-dead: %v, want DEAD-HOLDER-UNCHECKED", err)
		}
		if now := must(bob.L.Tip())(t); now != tip {
			t.Fatalf("the refused claim wrote: tip %s, was %s", now, tip)
		}
		return
	}
	if g.Lease.BootID != boot || g.Lease.PIDNS != pidNS {
		t.Fatalf("lease records boot %q pid_ns %d, want %q %d", g.Lease.BootID, g.Lease.PIDNS, boot, pidNS)
	}
	if err != nil || res.Takeover != lease.TakeoverDeadHolder {
		t.Fatalf("claim --reclaim-dead of a gone holder: %+v, %v", res, err)
	}
}
