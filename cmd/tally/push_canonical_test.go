package main

// Pushes of ledger commits in a form FORMAT.md does not allow, to a real
// server with tally's pre-receive hook (the harness of remote_test.go): a
// signed entry whose commit is re-made without the key, and entries whose
// times the format cannot write. The hook must refuse each, and the ledger
// must stay readable afterwards.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// pcWriteCommit writes raw as a commit object in dir with git itself and
// returns its id.
func pcWriteCommit(t *testing.T, dir string, raw []byte) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git hash-object: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPushSignedCommitOneForm: with signatures required on the server, alice
// makes a signed entry in her clone. Before she pushes it, an attacker who
// got the commit re-makes it without her key — its gpgsig header doubled,
// the same signature behind a second one, or (with the key) the signature
// re-made with SSHSIG hash sha256 — and pushes that with plain git. The
// server's pre-receive refuses each with BAD-SIGNATURE, tally verify in the
// attacker's clone fails the same way, and alice's own commit is then
// accepted.
func TestPushSignedCommitOneForm(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			a := c.clone("alice")
			keyFile := filepath.Join(t.TempDir(), "alice")
			gen := c.ok(a, "alice", nil, "keys", "generate", "--out", keyFile)
			signed := []string{"TALLY_SIGNING_KEY=" + keyFile}
			remote := []string{"--remote", "origin"}
			alice := func(args ...string) map[string]any {
				t.Helper()
				return c.ok(a, "alice", signed, append(remote, args...)...)
			}
			alice("init")
			alice("keys", "add", "alice", gen["public"].(string))
			alice("policy", "set", "--admins", "alice", "--require-signatures")
			c.ok(a, "alice", signed, "--local", "note", "signed by alice, not pushed yet")
			own := testrepo.Git(t, a, "rev-parse", "refs/tally/ledger")
			parent := testrepo.Git(t, a, "rev-parse", own+"^")
			if c.serverTip() != parent {
				t.Fatalf("server at %s, want alice's last pushed entry %s", c.serverTip(), parent)
			}

			x := c.clone("attacker")
			testrepo.Git(t, x, "fetch", "-q", a, "+refs/tally/ledger:refs/tally/ledger")
			raw := []byte(testrepo.Git(t, x, "cat-file", "commit", own) + "\n")
			orig, err := gitstore.ParseCommit(raw)
			if err != nil || orig.Signature == "" {
				t.Fatalf("alice's commit %s is not a signed commit (%v):\n%s", own, err, raw)
			}
			if pcWriteCommit(t, x, raw) != own {
				t.Fatal("re-writing alice's commit unchanged gives another id: the forgeries below would prove nothing")
			}
			header, msg, _ := strings.Cut(string(raw), "\n\n")
			at := strings.Index(header, "\ngpgsig ")
			sigHeader := header[at:] // "\ngpgsig …" to the end of the header
			keyBytes, err := os.ReadFile(keyFile)
			if err != nil {
				t.Fatal(err)
			}
			priv, err := identity.ParseEd25519(keyBytes, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			signer, err := ssh.NewSignerFromKey(priv)
			if err != nil {
				t.Fatal(err)
			}
			withSig := func(h sshsig.HashAlgorithm, payload []byte) []byte {
				s, err := sshsig.Sign(bytes.NewReader(payload), signer, h, "git")
				if err != nil {
					t.Fatal(err)
				}
				re := *orig
				re.Signature = string(sshsig.Armor(s))
				return re.Encode()
			}
			other := withSig(sshsig.HashSHA512, []byte("another payload"))
			otherHeader, _, _ := strings.Cut(string(other), "\n\n")
			otherSig := otherHeader[strings.Index(otherHeader, "\ngpgsig "):]

			forgeries := []struct{ what, raw string }{
				{"gpgsig header duplicated", header + sigHeader + "\n\n" + msg},
				{"another gpgsig before alice's", header[:at] + otherSig + sigHeader + "\n\n" + msg},
				{"re-signed with SSHSIG sha256", string(withSig(sshsig.HashSHA256, orig.Payload()))},
			}
			for _, f := range forgeries {
				id := pcWriteCommit(t, x, []byte(f.raw))
				if id == own {
					t.Fatalf("%s: same commit id", f.what)
				}
				testrepo.Git(t, x, "update-ref", "refs/tally/ledger", id)
				c.pushRefused(x, f.what, "BAD-SIGNATURE", "alice")
				c.refused(3, "BAD-SIGNATURE", x, "auditor", nil, "--local", "verify", "--full")
			}

			// Alice's own commit is accepted, and the server's ledger verifies.
			if exit, stderr := c.push(a, "origin", "refs/tally/ledger"); exit != 0 {
				t.Fatalf("alice's own signed entry refused:\n%s", stderr)
			}
			if got := c.serverTip(); got != own {
				t.Fatalf("server ledger at %s, alice pushed %s", got, own)
			}
			c.ok(x, "auditor", nil, "--remote", "origin", "verify", "--full")
		})
	}
}

// TestPushTimesInRange: timestamps end at 9999-12-31T23:59:59.999Z (four
// year digits). A claim at 9999-12-31T23:59 would store expires_at and
// max_hold_until in year 10000: the writer refuses it (USAGE), and the same
// claim forged by hand and pushed with plain git is refused by the hook
// (rule USAGE). The server's clock is at the end of 9999, so the entry is not
// refused for being ahead of it. Afterwards the ledger reads: status, lock
// and verify work, through the server and in the forger's clone.
func TestPushTimesInRange(t *testing.T) {
	const late = "9999-12-31T23:59:00Z"
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind, "TALLY_NOW="+late)
			seed := c.seeded("w", 1)
			remote := []string{"--remote", "origin"}
			tip := c.serverTip()
			p := c.refused(2, "USAGE", seed, "alice", []string{"TALLY_NOW=" + late}, append(remote, "claim", "w/c000")...)
			if p.ErrorField("limit") != "9999-12-31T23:59:59.999Z" {
				t.Fatalf("writer refusal does not name the limit: %s", p)
			}
			c.refused(2, "USAGE", seed, "alice", []string{"TALLY_NOW=9999-12-31T23:00:00-05:00"}, append(remote, "note", "x")...)
			if c.serverTip() != tip {
				t.Fatal("a refused append moved the server's ledger")
			}

			x := c.clone("forger")
			testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
			// The claim as a writer without the bound stored it: the rules
			// applied two days earlier, then every time moved to where
			// ts + ttl (30 min) and ts + max hold (1 h) fall, written as Go
			// writes a five-digit year.
			storedUnbounded := func(state chain.KV, e *chain.Entry) (*lease.Result, error) {
				early := *e
				early.TS = "9999-12-29T23:59:00.000Z"
				res, err := lease.Apply(state, &early)
				if err != nil {
					return nil, err
				}
				move := strings.NewReplacer(early.TS, e.TS,
					"9999-12-30T00:29:00.000Z", "10000-01-01T00:29:00.000Z", "9999-12-30T00:59:00.000Z", "10000-01-01T00:59:00.000Z")
				for k, v := range res.Changes {
					if v != nil {
						res.Changes[k] = []byte(move.Replace(string(v)))
					}
				}
				return res, nil
			}
			forgeBy(t, x, "claim", "mallory", "9999-12-31T23:59:00.000Z", lease.ClaimBody{
				CellRef: lease.CellRef{Wave: "w", Cell: "c000"}, TTL: 1800, PID: 1, Host: "forger", Mode: lease.ModeClaim}, storedUnbounded)
			if b := testrepo.Git(t, x, "log", "-p", "-1", "refs/tally/ledger"); !strings.Contains(b, `"expires_at":"10000-01-01T00:29:00.000Z"`) {
				t.Fatalf("the forged claim does not store a year-10000 expiry:\n%s", b)
			}
			c.pushRefused(x, "claim storing year-10000 times", "RULE-VIOLATION", "USAGE")
			c.refused(3, "RULE-VIOLATION", x, "auditor", nil, "--local", "verify", "--full")

			// The lock goes to the server's sequencer, which stamps it with
			// its own clock, a minute before the end: its TTL fits before it.
			for _, args := range [][]string{{"status"}, {"lock", "src", "--ttl", "30s"}, {"status"}, {"verify", "--full"}} {
				c.ok(seed, "alice", nil, append(remote, args...)...)
			}
			testrepo.Git(t, x, "update-ref", "refs/tally/ledger", tip)
			c.ok(x, "auditor", nil, "--local", "status")
		})
	}
}
