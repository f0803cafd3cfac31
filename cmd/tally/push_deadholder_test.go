package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// TestRemoteDeadHolderRefused: through a shared remote a live lease is never
// taken over on the taker's word. claim --remote --reclaim-dead is refused
// before anything is sent (DEAD-HOLDER-REMOTE, exit 2); a dead-holder
// takeover the real writer made in a clone's local ledger (with true
// evidence: the holder's process is gone, on this very machine) is refused
// by the server's hook when pushed with plain git, and the server's refs do
// not move, nor for a hand-forged one whose evidence copies the lease; sync
// does not send it either, but reports it as not applied,
// and once the lease has expired sends the same claim as an expiry takeover.
// Expiry takeover and max-hold steal still go through the remote.
func TestRemoteDeadHolderRefused(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			t0 := time.Now().UTC()
			at := func(d time.Duration) []string { return []string{"TALLY_NOW=" + chain.FormatTime(t0.Add(d))} }
			c := newNetCluster(t, kind, at(2*time.Hour)...) // the server's clock is ahead of every entry
			seed := c.seeded("w", 3)
			a, b := c.clone("agent-a"), c.clone("agent-b")
			for _, d := range []string{a, b} {
				// Compare-and-swap: each entry carries its clone's clock, which
				// this test moves; the server's sequencer would stamp its own.
				testrepo.Git(t, d, "config", "tally.sequencer", "false")
			}
			gone := exec.Command("true")
			if err := gone.Run(); err != nil { // started and reaped: its pid is free
				t.Fatal(err)
			}
			c.ok(a, "A", at(time.Second), "--remote", "origin", "claim", "w/c000", "--ttl", "1800", "--pid", fmt.Sprint(gone.Process.Pid))
			held := c.serverTip()

			p := c.refused(2, "DEAD-HOLDER-REMOTE", b, "B", at(2*time.Second), "--remote", "origin", "claim", "w/c000", "--reclaim-dead")
			if p.ErrorField("remote") != "origin" || c.serverTip() != held {
				t.Fatalf("%s; server tip %s, want %s", p, c.serverTip(), held)
			}

			// The same takeover made locally is legal there (the holder is gone
			// and the evidence says so); the server refuses it.
			c.ok(b, "B", at(3*time.Second), "--remote", "origin", "sync")
			if res := c.ok(b, "B", at(4*time.Second), "--local", "claim", "w/c000", "--reclaim-dead"); res["takeover"] != "dead-holder" {
				t.Fatalf("local reclaim-dead: %v", res)
			}
			c.pushRefused(b, "git push of a dead-holder takeover", "DEAD-HOLDER-REMOTE")

			// sync: not sent while the lease is live; the local ledger takes the
			// remote's, and the claim is reported.
			rep := c.ok(b, "B", at(5*time.Second), "--remote", "origin", "sync")
			dropped := arr(t, rep, "dropped")
			if rep["action"] != "rebuilt" || len(dropped) != 1 || c.serverTip() != held || rep["tip"] != held {
				t.Fatalf("sync of a dead-holder takeover: %v (server at %s, was %s)", rep, c.serverTip(), held)
			}
			if d := dropped[0].(map[string]any); d["kind"] != "claim" || d["code"] != "DEAD-HOLDER-REMOTE" || d["actor"] != "B" {
				t.Fatalf("dropped %v", d)
			}
			// ... and once the lease has expired, the same local claim is sent as
			// what entry time alone allows.
			c.ok(b, "B", at(6*time.Second), "--local", "claim", "w/c000", "--reclaim-dead")
			rep = c.ok(b, "B", at(31*time.Minute+2*time.Second), "--remote", "origin", "sync")
			if rep["action"] != "rebuilt" || len(arr(t, rep, "dropped")) != 0 || len(arr(t, rep, "rebuilt")) != 1 {
				t.Fatalf("sync after expiry: %v", rep)
			}
			last := netLedger(t, c.bare)
			if e := last[len(last)-1]; e.Actor != "B" || e.Body["dead"] != nil || !strings.HasSuffix(e.Subject, "(expired from A epoch 1)") {
				t.Fatalf("server's last entry: %+v", e)
			}

			// Expiry and max-hold steal through the remote.
			c.ok(a, "A", at(32*time.Minute), "--remote", "origin", "claim", "w/c001", "--ttl", "30")
			if res := c.ok(b, "B", at(33*time.Minute), "--remote", "origin", "claim", "w/c001"); res["takeover"] != "expired" {
				t.Fatalf("expiry takeover through the remote: %v", res)
			}
			c.ok(a, "A", at(34*time.Minute), "--remote", "origin", "claim", "w/c002", "--ttl", "900") // max hold: +30 min
			c.ok(a, "A", at(48*time.Minute), "--remote", "origin", "renew", "w/c002", "--epoch", "1", "--ttl", "900")
			c.ok(a, "A", at(62*time.Minute), "--remote", "origin", "renew", "w/c002", "--epoch", "1", "--ttl", "900")
			if res := c.ok(b, "B", at(64*time.Minute+time.Second), "--remote", "origin", "claim", "w/c002", "--steal", "--pid", fmt.Sprint(os.Getpid())); res["takeover"] != "steal" {
				t.Fatalf("steal through the remote: %v", res)
			}

			// A hand-forged takeover of B's live lease, its evidence copied from
			// the lease so that the rules accept it, pushed with plain git.
			l := obj(t, obj(t, c.ok(seed, "auditor", at(65*time.Minute), "--remote", "origin", "show", "w/c002"), "cell"), "lease")
			x := c.clone("forger")
			testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
			holder := lease.HolderID{Host: l["host"].(string), PID: int(l["pid"].(float64)), BootID: l["boot_id"].(string),
				PIDNS: uint64(l["pid_ns"].(float64)), PIDStart: uint64(l["pid_start"].(float64))}
			body := lease.ClaimBody{CellRef: lease.CellRef{Wave: "w", Cell: "c002"}, TTL: 600, PID: holder.PID + 1, Host: holder.Host,
				BootID: holder.BootID, PIDNS: holder.PIDNS, Mode: lease.ModeReclaimDead,
				Dead: &lease.DeadPeer{Actor: "B", Epoch: 2, Host: holder.Host, PID: holder.PID, BootID: holder.BootID,
					PIDNS: holder.PIDNS, PIDStart: holder.PIDStart}}
			forge(t, x, "claim", "X", chain.FormatTime(t0.Add(66*time.Minute)), body, true)
			c.pushRefused(x, "git push of a forged dead-holder takeover", "DEAD-HOLDER-REMOTE")

			if v := c.ok(seed, "auditor", at(2*time.Hour), "--remote", "origin", "verify", "--full"); v["entries"] != 10.0 {
				t.Fatalf("remote verify: %v", v)
			}
		})
	}
}
