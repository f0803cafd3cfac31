package main

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// serverHook runs the bare repository's pre-receive check the way
// receive-pack runs it (GIT_DIR set, "<old> <new> <ref>" on stdin) and
// returns its exit code and stderr.
func serverHook(t *testing.T, bin, bare, stdin string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, "hook", "pre-receive")
	cmd.Dir, cmd.Env = bare, testrepo.Env("GIT_DIR="+bare)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("tally hook pre-receive: %v", err)
	}
	return 0, string(out)
}

// TestPreReceiveLostRaceFirst: a push whose old ledger value is no longer the
// server's is refused before its entries are looked at, with the stable
// lost-race line naming the current tip and a retry hint; the same forged
// commit pushed on the current tip is judged by the verifier instead.
func TestPreReceiveLostRaceFirst(t *testing.T) {
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("race", 2)
	t1 := c.serverTip()
	c.ok(seed, "agent-0", nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	t2 := c.serverTip()
	forge := func(parent string) string {
		return testrepo.Git(t, c.bare, "commit-tree", parent+"^{tree}", "-p", parent, "-m", "not an entry")
	}
	exit, out := serverHook(t, c.bin, c.bare, t1+" "+forge(t1)+" refs/tally/ledger\n")
	line := regexp.MustCompile(`(?m)^tally: refused refs/tally/ledger: CONFLICT: the ledger moved from ` + t1 + ` to ` + t2 + `; retry-after-ms=([0-9]+)$`).FindStringSubmatch(out)
	if exit != 1 || line == nil {
		t.Fatalf("stale push: exit %d, want the lost-race refusal:\n%s", exit, out)
	}
	if ms, _ := strconv.Atoi(line[1]); ms < 5 || ms > 1000 {
		t.Fatalf("retry hint %d ms for one entry landed, want within [5, 1000]", ms)
	}
	exit, out = serverHook(t, c.bin, c.bare, t2+" "+forge(t2)+" refs/tally/ledger\n")
	if exit != 1 || !strings.Contains(out, "tally: refused refs/tally/ledger: ") || strings.Contains(out, "CONFLICT") {
		t.Fatalf("forged entry on the current tip: exit %d, want the verifier's refusal:\n%s", exit, out)
	}
}

// pushedLedgerUpdates counts the server's ledger updates that receive-pack
// made from a pushed compare-and-swap: it logs each ref update it makes with
// the message "push" (NewBare keeps a reflog of every ref), where the
// sequencer's appends are tally's own.
func pushedLedgerUpdates(t testing.TB, bare string) int {
	t.Helper()
	out := testrepo.Git(t, bare, "reflog", "show", "--format=%gs", "refs/tally/ledger")
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "push" {
			n++
		}
	}
	return n
}

// sequencedAgent starts a git daemon cluster seeded with a wave of cells
// (netCluster.seeded) and one agent's clone with the sequencer on.
func sequencedAgent(t *testing.T, wave string, cells int) (c *netCluster, seed, dir string) {
	t.Helper()
	c = newNetCluster(t, gitserver.GitDaemon)
	seed = c.seeded(wave, cells)
	dir = c.agents(1)[0]
	sequenced(t, dir)
	return c, seed, dir
}

// netClaims are the server's claims: the actors of each claimed cell's
// claim entries, in ledger order.
func netClaims(t testing.TB, bare string) map[string][]string {
	claims := map[string][]string{}
	for _, e := range netLedger(t, bare) {
		if e.Kind == "claim" {
			claims[e.cell()] = append(claims[e.cell()], e.Actor)
		}
	}
	return claims
}

// sequenced turns the sequencer on in each clone (git config tally.sequencer).
func sequenced(t testing.TB, dirs ...string) {
	for _, d := range dirs {
		testrepo.Git(t, d, "config", "tally.sequencer", "true")
	}
}

// gitFetches runs tally as netRun does with git's command trace in a new
// file and returns the result and how many `git fetch` it ran.
func gitFetches(t testing.TB, bin, dir, actor string, args ...string) (testrepo.Result, int) {
	f, err := os.CreateTemp(t.TempDir(), "trace")
	if err != nil {
		return testrepo.Result{Err: err}, 0
	}
	f.Close()
	p := netRun(bin, dir, actor, []string{"GIT_TRACE=" + f.Name()}, args...)
	b, err := os.ReadFile(f.Name())
	if err != nil && p.Err == nil {
		p.Err = err
	}
	return p, len(regexp.MustCompile(`(?m)trace: built-in: git fetch `).FindAll(b, -1))
}

// TestSequencedClaimNext: with the sequencer on, agents' claim --next goes to
// the server as a request, round after round with all agents at once: every
// agent gets a cell, none twice, the server's ledger holds exactly the
// claims the agents were told about (by them, one per cell), no request ref
// is left on the server, and the ledger verifies. An agent's first request
// (it has verified nothing of the remote yet, so it names no have) fetches;
// every later one takes the entries the server sent with its answer and
// runs no fetch at all.
func TestSequencedClaimNext(t *testing.T) {
	rounds, agents := 4, 8
	if netStress() {
		rounds = 30
	}
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("seq", rounds*agents)
			dirs := c.agents(agents)
			sequenced(t, dirs...)
			told := map[string]string{}
			for round := 0; round < rounds; round++ {
				fetches := make([]int, agents)
				out := netTogether(agents, func(i int) testrepo.Result {
					p, n := gitFetches(t, c.bin, dirs[i], netAgent(i), "--remote", "origin", "claim", "--next", "--ttl", "3600")
					fetches[i] = n
					return p
				})
				for i, p := range out {
					if p.Err != nil || p.Code != 0 {
						t.Fatalf("round %d %s: %s %v", round, netAgent(i), p, p.Err)
					}
					if first := round == 0; first != (fetches[i] > 0) {
						t.Fatalf("round %d %s: %d fetches, want them only in the first round (after it the server sends the entries)", round, netAgent(i), fetches[i])
					}
					key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
					if prev, ok := told[key]; ok {
						t.Fatalf("%s granted to %s and %s", key, prev, netAgent(i))
					}
					told[key] = netAgent(i)
				}
			}
			claims := netClaims(t, c.bare)
			if len(claims) != len(told) {
				t.Fatalf("server ledger has claims of %d cells, agents were told %d", len(claims), len(told))
			}
			for cell, who := range told {
				if got := claims[cell]; len(got) != 1 || got[0] != who {
					t.Fatalf("%s: server ledger has claims by %v, agent told %s", cell, got, who)
				}
			}
			if n := pushedLedgerUpdates(t, c.bare); n != 2 {
				t.Fatalf("%d ledger updates were pushed, want 2 (init and plan): the claims did not go through the sequencer", n)
			}
			if refs := c.lsRemote(); strings.Contains(refs, "refs/for/") {
				t.Fatalf("request refs left on the server:\n%s", refs)
			}
			res := c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
			if res["entries"] != float64(2+rounds*agents) {
				t.Fatalf("remote verify: %v", res)
			}
		})
	}
}

// TestSequencedClientPacks: a clone whose every claim goes through the
// sequencer appends nothing itself, yet each request fetches a pack into
// it; those packs are compacted like an append's (the trigger is 12
// mergeable packs), so after 36 requests the clone holds at most 24 packs
// rather than one per request, and every git and tally lookup there stays
// as fast as in a clone that appends.
func TestSequencedClientPacks(t *testing.T) {
	t.Parallel()
	const claims, most = 36, 24
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("packs", claims)
	dir := c.agents(1)[0]
	sequenced(t, dir)
	for i := 0; i < claims; i++ {
		c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	}
	testrepo.WaitCompaction(t, filepath.Join(dir, ".git"))
	packs, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	if len(packs) > most {
		t.Fatalf("%d packs in the clone after %d sequenced claims, want at most %d: fetched packs are never compacted", len(packs), claims, most)
	}
	if n := pushedLedgerUpdates(t, c.bare); n != 2 {
		t.Fatalf("%d ledger updates were pushed, want 2 (init and plan): the claims did not go through the sequencer", n)
	}
}

// TestSequencedRefusalDetails: a sequenced claim --next the server refuses
// comes back as the same error a compare-and-swap clone gets on the same
// ledger (code, message and details such as NO-READY-CELL's open count),
// with the same exit code, and moves nothing.
func TestSequencedRefusalDetails(t *testing.T) {
	t.Parallel()
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("one", 1)
	dirs := c.agents(3)
	sequenced(t, dirs[0], dirs[1])
	c.ok(dirs[0], netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	before := c.serverTip()
	seq := c.refused(1, "NO-READY-CELL", dirs[1], netAgent(1), nil, "--remote", "origin", "claim", "--next")
	cas := c.refused(1, "NO-READY-CELL", dirs[2], netAgent(2), nil, "--remote", "origin", "claim", "--next")
	if seq.ErrorField("open") != 1.0 {
		t.Fatalf("sequenced refusal without the open count: %s", seq)
	}
	if !reflect.DeepEqual(seq.JSON["error"], cas.JSON["error"]) {
		t.Fatalf("sequenced refusal %v, compare-and-swap refusal %v: want the same error", seq.JSON["error"], cas.JSON["error"])
	}
	if after := c.serverTip(); after != before {
		t.Fatalf("refused requests moved the server's ledger from %s to %s", before, after)
	}
}

// killingSequencer replaces the bare repository's proc-receive shim with a
// wrapper that runs it and, while the file mode in the repository says so,
// kills it with SIGKILL after it has written the first limit bytes of its
// answer: "18" is right after its version reply (while it reads the request
// or appends), "34" in the middle of the "ok" line of a one-request push (the
// entry has landed; its old-oid and new-oid never reach the client). Any
// other content lets it answer.
func killingSequencer(t *testing.T, bare string) (mode string) {
	t.Helper()
	return modeSequencer(t, bare, "kill-mode", "18|34", func(real, mode string) string {
		return `dir=$(mktemp -d) || exit 1
mkfifo "$dir/out"
exec 3<&0 # an asynchronous command's own stdin is /dev/null
'` + real + `' "$@" <&3 >"$dir/out" 2>>'` + mode + `.log' &
pid=$!
dd bs=1 count="$m" <"$dir/out" 2>/dev/null # unbuffered, unlike head -c
kill -9 "$pid"
rm -rf "$dir"
exit 1
`
	})
}

// modeSequencer wraps the sequencer (wrapSequencer) with a script that
// runs the real hook unchanged unless the file mode in the repository (its
// name returned) holds one of modes (a shell case pattern), when the rest,
// body(the real hook, the mode file), runs with the mode in $m.
func modeSequencer(t *testing.T, bare, name, modes string, body func(real, mode string) string) (mode string) {
	t.Helper()
	mode = filepath.Join(bare, name)
	wrapSequencer(t, bare, func(real string) string {
		return `#!/bin/sh
m=$(cat '` + mode + `' 2>/dev/null)
case "$m" in
` + modes + `) ;;
*) exec '` + real + `' "$@" ;;
esac
` + body(real, mode)
	})
	return mode
}

// wrapSequencer moves the bare repository's proc-receive shim aside and
// writes script(the moved shim's path) in its place.
func wrapSequencer(t *testing.T, bare string, script func(real string) string) {
	t.Helper()
	shim := filepath.Join(bare, "hooks", "proc-receive")
	real := shim + ".real"
	if err := os.Rename(shim, real); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shim, []byte(script(real)), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestSequencedKill9: the sequencer killed with SIGKILL mid-request, in
// rounds of concurrent requests: right after its version reply (the request
// may or may not have been applied) and right after it accepted (applied,
// but the answer is lost), between rounds where it answers. Every agent that
// was told it got a cell has it in the server's ledger, every claim there
// was told to its agent (a lost answer is found by the client, never
// granted twice), no cell is claimed twice, requests after the kills are
// served (no lock was left behind), and the ledger verifies.
func TestSequencedKill9(t *testing.T) {
	rounds, agents := 6, 4
	if netStress() {
		rounds = 30
	}
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("kill", rounds*agents)
	dirs := c.agents(agents)
	sequenced(t, dirs...)
	mode := killingSequencer(t, c.bare)
	told := map[string]string{}
	failed := 0
	for round := 0; round < rounds; round++ {
		limit := []string{"18", "34", "none"}[round%3]
		if err := os.WriteFile(mode, []byte(limit), 0o644); err != nil {
			t.Fatal(err)
		}
		out := netTogether(agents, func(i int) testrepo.Result {
			return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		})
		for i, p := range out {
			switch {
			case p.Err != nil:
				t.Fatalf("round %d: %s: %v", round, p, p.Err)
			case p.Code == 0:
				key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
				if prev, ok := told[key]; ok {
					t.Fatalf("%s granted to %s and %s", key, prev, netAgent(i))
				}
				told[key] = netAgent(i)
			case limit == "18" && p.Code == 1 && p.ErrorCode() == "REMOTE-UNREACHABLE":
				failed++ // killed before it applied the request
			default:
				b, _ := os.ReadFile(mode + ".log")
				t.Logf("hook log: %s", b)
				t.Fatalf("round %d (kill after %s bytes): %s", round, limit, p)
			}
		}
	}
	claims := netClaims(t, c.bare)
	for cell, who := range told {
		if got := claims[cell]; len(got) != 1 || got[0] != who {
			t.Fatalf("%s: server ledger has claims by %v, agent told %s", cell, got, who)
		}
	}
	if len(claims) != len(told) {
		t.Fatalf("server ledger has claims of %d cells, agents were told of %d: an applied request was lost to its agent", len(claims), len(told))
	}
	if n := pushedLedgerUpdates(t, c.bare); n != 2 {
		t.Fatalf("%d ledger updates were pushed, want 2 (init and plan): the claims did not go through the sequencer", n)
	}
	c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
	t.Logf("%d rounds x %d agents: %d claims told and in the ledger, %d requests killed before applying", rounds, agents, len(told), failed)
}

// TestSequencedPushers: over git http-backend behind basic auth with pushers
// bound, the sequencer judges a request's actor by who pushed it, as
// pre-receive judges a pushed entry: bob's credentials asking for a cell as
// alice are refused (PUSHER-DENIED, exit 2), an anonymous request is refused
// (PUSHER-UNKNOWN), and neither moves the server's ledger; bob as bob gets
// his cell.
func TestSequencedPushers(t *testing.T) {
	t.Parallel()
	c := newPusherCluster(t, map[string]string{"admin": "pw-admin", "bob": "pw-bob"})
	seed := c.as("admin").clone("seed")
	c.ok(seed, "admin", nil, "--remote", "origin", "init")
	c.ok(seed, "admin", nil, "--remote", "origin", "plan", netPlan(t, seed, "pw", 4, nil))
	c.ok(seed, "admin", nil, "--remote", "origin", "policy", "set-pushers", "admin=*", "bob=bob")
	bob := c.as("bob").clone("bob")
	anon := c.as("").clone("anon")
	sequenced(t, bob, anon)
	before := c.serverTip()
	p := c.refused(2, "PUSHER-DENIED", bob, "alice", nil, "--remote", "origin", "claim", "--next")
	if msg, _ := p.ErrorField("message").(string); !strings.Contains(msg, "pusher bob (REMOTE_USER) may not push entries of actor alice") {
		t.Fatalf("refusal does not name pusher and actor: %s", p)
	}
	c.refused(2, "PUSHER-UNKNOWN", anon, "alice", nil, "--remote", "origin", "claim", "--next")
	if after := c.serverTip(); after != before {
		t.Fatalf("refused requests moved the server's ledger from %s to %s", before, after)
	}
	if got := c.ok(bob, "bob", nil, "--remote", "origin", "claim", "--next"); got["cell"] != "c000" {
		t.Fatalf("bob's own claim: %v", got)
	}
}

// tamperingSequencer replaces the bare repository's proc-receive shim with a
// wrapper that runs it and, while the file mode in the repository names a
// tampering, changes what it says before the pusher hears it: the sent
// range on its stderr (the "remote: " lines, whose objects are pack entries,
// form 2) and, for "tip", the new-oid of its answer. The modes: "mute" says
// nothing (a server from before sent ranges); on the range's last entry,
// "flip" changes a byte inside its zlib stream, "cut" cuts its stream's last
// three bytes, "other" replaces it with the well-formed entry in the file
// other (an object nobody needs), "delta" replaces it with the ref-delta
// entry in the file delta, "drop" leaves it out and announces one object
// less; "truncate" leaves out the end line; "extra" adds the entry in the
// file other, announced; "tip" reports, and sends, a commit on top of the
// real entry with its parent's tree (an entry that does not verify) as the
// entry. Any other content lets it speak.
func tamperingSequencer(t *testing.T, bare, other, delta string) (mode string) {
	t.Helper()
	return modeSequencer(t, bare, "tamper-mode", "mute|flip|cut|other|delta|drop|truncate|extra|tip", func(real, mode string) string {
		return `dir=$(mktemp -d) || exit 1
mkfifo "$dir/pipe"
exec 3<&0 # an asynchronous command's own stdin is /dev/null
'` + real + `' "$@" <&3 >"$dir/pipe" 2>"$dir/err" &
pid=$!
# The version reply (18 bytes) goes through at once: receive-pack waits for
# it before it sends the commands. The answer is held until the hook exits.
{ dd bs=1 count=18 2>/dev/null; cat >"$dir/out"; } <"$dir/pipe"
wait "$pid"
rc=$?
new=$(grep -ao 'option new-oid [0-9a-f]\{40\}' "$dir/out" | cut -d' ' -f3)
fake=$new
objline=
if [ "$m" = tip ] && [ -n "$new" ]; then
	fake=$(git commit-tree "$new~1^{tree}" -p "$new" -m forged) || exit 1
	echo "$fake" >'` + mode + `.forged'
	# the forged commit's pack entry: a one-object pack without its
	# 12-byte header and 20-byte trailer
	objline="tally-entry $(echo "$fake" | git pack-objects -q --stdout | tail -c +13 | head -c -20 | base64 -w0)"
	sed "s/$new/$fake/" "$dir/out"
else
	cat "$dir/out"
fi
if [ "$m" != mute ]; then
	awk -v m="$m" -v fake="$fake" -v objline="$objline" -v other="$(cat '` + other + `')" -v delta="$(cat '` + delta + `')" '
	{ l[++n] = $0; if ($1 == "tally-entry") last = n }
	END {
		for (i = 1; i <= n; i++) {
			$0 = l[i]
			if ($1 == "tally-range" && m == "drop") $5 = $5 - 1
			if ($1 == "tally-range" && (m == "extra" || m == "tip")) {
				$5 = $5 + 1; $4 = fake; print; print (m == "extra" ? "tally-entry " other : objline); continue
			}
			if ($1 == "tally-range-end" && m == "truncate") continue
			if ($1 == "tally-range-end") $2 = fake
			if (i == last && m == "drop") continue
			if (i == last && m == "flip") { c = substr($2, 12, 1); $2 = substr($2, 1, 11) (c == "A" ? "B" : "A") substr($2, 13) }
			if (i == last && m == "cut") $2 = substr($2, 1, length($2) - 4)
			if (i == last && m == "other") $2 = other
			if (i == last && m == "delta") $2 = delta
			print
		}
	}' "$dir/err" >&2
fi
rm -rf "$dir"
exit $rc
`
	})
}

// packEntry is the base64 of the pack entry of kind (a git object type
// number or 7, a ref-delta) holding payload, with prefix (a ref-delta's
// base id) between its type and size header and its zlib stream.
func packEntry(t testing.TB, kind byte, prefix, payload []byte) string {
	size := len(payload)
	e := []byte{kind<<4 | byte(size&15)}
	for size >>= 4; size > 0; size >>= 7 {
		e[len(e)-1] |= 0x80
		e = append(e, byte(size&0x7f))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(payload); err != nil || zw.Close() != nil {
		t.Fatal("zlib")
	}
	return base64.StdEncoding.EncodeToString(append(append(e, prefix...), z.Bytes()...))
}

// TestSequencedSentRangeTampered: a server whose sequencer hook tampers
// with the pack entries it sends beside its answer gets nothing past the
// client. An entry whose zlib stream is changed or cut, one replaced by a
// well-formed entry of other content (it hashes to an id nobody needs) or
// by a ref-delta (whose result a copy into the clone's pack could not
// vouch for), one left out, a range cut short, or no range at all: the
// client takes nothing from it, fetches, and holds the cell the server's
// ledger really granted it. An entry added that nobody asked for: the
// range is taken (no fetch) and the extra object is not stored. A reported
// entry that does not verify (a commit on the real one with its parent's
// state): not taken from the range, and, as the fetched ledger does not
// hold it, refused (REMOTE-REJECTED); the forged commit is not in the
// clone, whose record and tracking ref stay on the server's real tip.
// Across it all no cell is granted twice, and an untampered request then
// takes its range again.
func TestSequencedSentRangeTampered(t *testing.T) {
	t.Parallel()
	c, seed, dir := sequencedAgent(t, "tamper", 14)
	content := []byte("an object nobody asked for\n")
	emptyTree, _ := hex.DecodeString("4b825dc642cb6eb9a060e54bf8d69288fbee4904") // every clone has it
	tmp := t.TempDir()
	extra, other, delta := filepath.Join(tmp, "extra"), filepath.Join(tmp, "other"), filepath.Join(tmp, "delta")
	for f, b := range map[string]string{
		extra: string(content),
		other: packEntry(t, 3, nil, content),
		// a ref-delta on the empty tree: source size 0, target size, insert content
		delta: packEntry(t, 7, emptyTree, append([]byte{0, byte(len(content)), byte(len(content))}, content...)),
	} {
		if err := os.WriteFile(f, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	extraID := testrepo.Git(t, dir, "hash-object", extra)
	mode := tamperingSequencer(t, c.bare, other, delta)
	told := map[string]bool{}
	claim := func(m string, wantFetch bool) testrepo.Result {
		t.Helper()
		if err := os.WriteFile(mode, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		p, fetches := gitFetches(t, c.bin, dir, netAgent(0), "--remote", "origin", "claim", "--next", "--ttl", "3600")
		if p.Err != nil {
			t.Fatalf("%s: %s: %v", m, p, p.Err)
		}
		if p.Code == 0 {
			key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
			if told[key] {
				t.Fatalf("%s: %s granted twice", m, key)
			}
			told[key] = true
			if wantFetch != (fetches > 0) {
				t.Fatalf("%s: %d fetches, want a fetch %v\n%s", m, fetches, wantFetch, p.Stderr)
			}
		}
		return p
	}
	claim("none", true) // the first request names no have: it fetches
	claim("none", false)
	for _, m := range []string{"flip", "cut", "other", "delta", "drop", "truncate", "mute"} {
		if p := claim(m, true); p.Code != 0 {
			t.Fatalf("%s: %s, want the cell (after a fetch)", m, p)
		}
		if _, err := netGit(dir, nil, "cat-file", "-e", extraID); err == nil {
			t.Fatalf("%s: the object the server put in the range (%s) was stored", m, extraID)
		}
	}
	if p := claim("extra", false); p.Code != 0 {
		t.Fatalf("extra: %s", p)
	}
	if _, err := netGit(dir, nil, "cat-file", "-e", extraID); err == nil {
		t.Fatalf("the object the server added to the range (%s) was stored", extraID)
	}
	before := len(netLedger(t, c.bare))
	p := claim("tip", true)
	if p.Code != 2 || p.ErrorCode() != "REMOTE-REJECTED" {
		t.Fatalf("tip: %s, want REMOTE-REJECTED (the reported entry is not in the server's ledger)", p)
	}
	real := c.serverTip()
	if n := len(netLedger(t, c.bare)); n != before+1 {
		t.Fatalf("the server's ledger went from %d to %d entries, want the one real claim", before, n)
	}
	forged, err := os.ReadFile(mode + ".forged")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := netGit(dir, nil, "cat-file", "-e", strings.TrimSpace(string(forged))); err == nil {
		t.Fatalf("the forged entry commit %s was stored in the clone", forged)
	}
	if got := testrepo.Git(t, dir, "rev-parse", "refs/remotes/origin/tally/ledger"); got != real {
		t.Fatalf("tracking ref at %s, want the server's tip %s", got, real)
	}
	if p := claim("none", false); p.Code != 0 {
		t.Fatalf("after the tampering: %s", p)
	}
	for cell, who := range netClaims(t, c.bare) {
		if len(who) > 1 {
			t.Fatalf("%s claimed by %v in the server's ledger", cell, who)
		}
	}
	c.ok(dir, netAgent(0), nil, "--remote", "origin", "verify", "--full")
	c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
}

// TestSequencedTrackingRefLocked: a sent range whose tracking ref cannot be
// moved (a competing git holds its lock file) is not recorded as verified:
// the clone's record of the remote never names a tip its tracking ref does
// not, so no git gc --prune=now can drop the range's pack from under the
// record. The claim falls back to the fetch (which the same lock stops);
// once the lock is gone, and after a gc, the next claims take their ranges
// and the clone verifies; no cell is granted twice.
func TestSequencedTrackingRefLocked(t *testing.T) {
	t.Parallel()
	c, _, dir := sequencedAgent(t, "locked", 6)
	tracking := filepath.Join(dir, ".git", "refs", "remotes", "origin", "tally", "ledger")
	claim := func() testrepo.Result {
		t.Helper()
		p := c.run(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		if p.Err != nil {
			t.Fatal(p.Err)
		}
		return p
	}
	consistent := func(when string) {
		t.Helper()
		var rec struct{ Commit string }
		b, err := os.ReadFile(filepath.Join(dir, ".git", "tally", "remotes", "origin.json"))
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil {
			t.Fatalf("%s: the remote record: %v", when, err)
		}
		if got := testrepo.Git(t, dir, "rev-parse", "refs/remotes/origin/tally/ledger"); got != rec.Commit {
			t.Fatalf("%s: the record names %s, the tracking ref is at %s", when, rec.Commit, got)
		}
	}
	for i := 0; i < 2; i++ { // the first fetches, the second takes its range
		if p := claim(); p.Code != 0 {
			t.Fatalf("claim %d: %s", i, p)
		}
	}
	consistent("after two claims")
	if err := os.WriteFile(tracking+".lock", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	locked := claim()
	consistent("after a claim with the tracking ref locked")
	if err := os.Remove(tracking + ".lock"); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, dir, "gc", "-q", "--prune=now")
	for i := 0; i < 2; i++ {
		if p := claim(); p.Code != 0 {
			t.Fatalf("claim %d after the lock (the locked one said %s): %s", i, locked, p)
		}
		consistent("after the lock")
	}
	for cell, who := range netClaims(t, c.bare) {
		if len(who) > 1 {
			t.Fatalf("%s claimed by %v in the server's ledger", cell, who)
		}
	}
	c.ok(dir, netAgent(0), nil, "--remote", "origin", "verify", "--full")
}

// TestSequencedRequestSkipsPreReceive: a push of requests only, which the
// server hands to its sequencer, runs no tally pre-receive (the sequencer
// judges the request), and skipping it opens nothing. With the server's
// tally.hookTimeout made invalid, on which tally's pre-receive refuses every
// push, a sequenced claim still lands. A plain git push of a request beside
// a forged ledger commit is refused by the full check, whole. A request
// pushed where receive.procReceiveRefs does not hand additions to the
// sequencer (unset, a value whose modifiers are deletions only, a value
// with a space or a newline in it, which git matches whole) is refused by
// pre-receive (SEQUENCER-ABSENT) and stored as no ref; a value git routes by
// (trailing slashes dropped, however many) serves requests.
func TestSequencedRequestSkipsPreReceive(t *testing.T) {
	t.Parallel()
	c, seed, dir := sequencedAgent(t, "skip", 4)
	c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	empty := testrepo.Git(t, dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	request := testrepo.Git(t, dir, "commit-tree", empty, "-m", `{"actor":"agent-0","holder":{"host":"h","pid":1},"nonce":"00000000000000000000000000000000","op":"claim-next","ttl":0,"v":1}`)
	testrepo.Git(t, seed, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	tip := c.serverTip()
	forged := testrepo.Git(t, seed, "commit-tree", tip+"^{tree}", "-p", tip, "-m", "not an entry")
	testrepo.Git(t, seed, "fetch", "-q", dir, request) // the request commit, for seed to push
	before := c.lsRemote()
	exit, stderr := c.push(seed, "origin", forged+":refs/tally/ledger", request+":refs/for/tally/claim-next")
	if exit == 0 || netFirstLine(stderr, "tally: refused refs/tally/ledger: ") == "" {
		t.Fatalf("a request beside a forged ledger commit: exit %d, want tally's refusal of the ledger update:\n%s", exit, stderr)
	}
	if after := c.lsRemote(); after != before {
		t.Fatalf("the refused mixed push moved the server's refs:\n%s\n->\n%s", before, after)
	}
	for _, routing := range [][]string{nil, {"d:refs/for/tally"}, {"refs/for/tally refs/heads"}, {"x\nrefs/for/tally"}} {
		netGit(c.bare, nil, "config", "--unset-all", "receive.procReceiveRefs") // exit 5 when none is set
		for _, v := range routing {
			testrepo.Git(t, c.bare, "config", "--add", "receive.procReceiveRefs", v)
		}
		exit, stderr := c.push(dir, "origin", request+":refs/for/tally/claim-next")
		if exit == 0 || netFirstLine(stderr, "tally: refused refs/for/tally/claim-next: SEQUENCER-ABSENT: ") == "" {
			t.Fatalf("request with receive.procReceiveRefs %v: exit %d, want SEQUENCER-ABSENT:\n%s", routing, exit, stderr)
		}
		if refs := c.lsRemote(); strings.Contains(refs, "refs/for/") {
			t.Fatalf("request with receive.procReceiveRefs %v stored as a ref:\n%s", routing, refs)
		}
	}
	testrepo.Git(t, c.bare, "config", "receive.procReceiveRefs", "a:refs/for/tally//")
	testrepo.Git(t, c.bare, "config", "tally.hookTimeout", "not-a-duration")
	exit, stderr = c.push(seed, "origin", "HEAD:refs/heads/other")
	if exit == 0 || !strings.Contains(stderr, "USAGE") {
		t.Fatalf("a code push with tally.hookTimeout invalid: exit %d, want USAGE from tally's pre-receive:\n%s", exit, stderr)
	}
	p := c.run(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	if p.Code != 0 {
		t.Fatalf("a sequenced claim with tally.hookTimeout invalid: %s; want it served without tally's pre-receive", p)
	}
	if n := pushedLedgerUpdates(t, c.bare); n != 2 {
		t.Fatalf("%d ledger updates were pushed, want 2 (init and plan)", n)
	}
}

// oldSequencer replaces the bare repository's proc-receive shim with one
// that answers as a server from before the intent's member field (have, or
// sent): it speaks the protocol itself up to the commands, refuses a
// request whose intent has that member as that server's intent decoder
// does (USAGE, unknown field), and hands any other to the real hook. It
// logs "refused" or "served" per request to the returned file.
func oldSequencer(t *testing.T, bare, field string) (log string) {
	t.Helper()
	log = filepath.Join(bare, "old-sequencer.log")
	wrapSequencer(t, bare, func(real string) string {
		return `#!/bin/sh
raw=$(mktemp) || exit 1
trap 'rm -f "$raw"' EXIT
# block copies pkt-lines from stdin to $raw up to a flush; the last
# command's new oid and ref are left in $new and $ref
block() {
	while :; do
		len=$(dd bs=1 count=4 2>/dev/null)
		printf '%s' "$len" >>"$raw"
		[ "$len" != 0000 ] || return 0
		line=$(dd bs=1 count=$((0x$len - 4)) 2>/dev/null | tee -a "$raw")
		set -- $line
		new=$2 ref=$3
	done
}
block
printf '000eversion=1'; printf '\0'; printf '0000' # printf would read \0000 as one octal escape
block
if git cat-file commit "$new" | grep -q '"` + field + `":'; then
	echo refused >>'` + log + `'
	text='ng '$ref' tally USAGE: the request is not an intent: json: unknown field "` + field + `"'
	printf '%04x%s0000' $((${#text} + 4)) "$text"
	exit 0
fi
echo served >>'` + log + `'
'` + real + `' <"$raw" | { dd bs=1 count=18 >/dev/null 2>&1; cat; }
`
	})
	return log
}

// TestSequencedOldServer: against a server from before the have field
// (which refuses an intent with a member it does not know), a clone that
// names its verified tip is refused unread, sends the same request once
// more without it, and gets its cell through a fetch, as before. Against a
// server from before the sent field (range form 1 only), the request is
// sent once more with have but without sent, and the server's form 1
// range — what this server sends a client that names no sent, as every
// client from before it — is taken without a fetch. In both, no cell is
// granted twice and no request is applied twice.
func TestSequencedOldServer(t *testing.T) {
	for _, field := range []string{"have", "sent"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			c, _, dir := sequencedAgent(t, "old", 4)
			log := oldSequencer(t, c.bare, field)
			cells := map[string]bool{}
			for i := 0; i < 3; i++ {
				p, fetches := gitFetches(t, c.bin, dir, netAgent(0), "--remote", "origin", "claim", "--next", "--ttl", "3600")
				// Only the first claim (no have yet) fetches from a server
				// that takes have.
				if wantFetch := i == 0 || field == "have"; p.Err != nil || p.Code != 0 || (fetches > 0) != wantFetch {
					t.Fatalf("claim %d: %s (%d fetches, want a fetch %v) %v", i, p, fetches, wantFetch, p.Err)
				}
				key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
				if cells[key] {
					t.Fatalf("%s granted twice", key)
				}
				cells[key] = true
			}
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			// The first claim names no have (nothing verified yet), and so
			// no sent; each later one is refused with the field and sent
			// again without.
			if got, want := strings.Fields(string(b)), []string{"served", "refused", "served", "refused", "served"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("the server saw %v, want %v", got, want)
			}
			if claims := netClaims(t, c.bare); len(claims) != 3 {
				t.Fatalf("claims of %d cells in the server's ledger, want 3 (one each)", len(claims))
			}
		})
	}
}

// TestSequencedRangeForms: the sequencer answers a request in the range
// form it names, by plain git push of hand-made intents: one with have and
// no sent (every client from before the sent field) gets form 1, each
// object's content; one with sent 2 (a client from before form 3) gets
// form 2, pack entries only; one with sent 3, or a form this server does
// not know yet, gets form 3, pack entries and deltas; one with sent but no
// have, or sent 1, is refused (USAGE) and appends nothing.
func TestSequencedRangeForms(t *testing.T) {
	t.Parallel()
	c, _, dir := sequencedAgent(t, "forms", 6)
	empty := testrepo.Git(t, dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	for i, tc := range []struct {
		sent, have bool
		extra      string
		want       string
	}{
		{have: true, want: "remote: tally-range 1 "},
		{have: true, sent: true, extra: `"sent":2,`, want: "remote: tally-range 2 "},
		{have: true, sent: true, extra: `"sent":3,`, want: "remote: tally-range 3 "},
		{have: true, sent: true, extra: `"sent":9,`, want: "remote: tally-range 3 "},
		{have: true, sent: true, extra: `"sent":1,`, want: "USAGE"},
		{sent: true, extra: `"sent":2,`, want: "USAGE"},
	} {
		tip := c.serverTip()
		have := ""
		if tc.have {
			have = `"have":"` + tip + `",`
		}
		intent := `{"actor":"agent-0",` + have + `"holder":{"host":"h","pid":1},"nonce":"0000000000000000000000000000000` + strconv.Itoa(i) + `","op":"claim-next",` + tc.extra + `"ttl":0,"v":1}`
		// the intent exactly as the message (commit-tree would add a line break)
		raw := filepath.Join(t.TempDir(), "request")
		if err := os.WriteFile(raw, []byte("tree "+empty+"\nauthor t <t> 0 +0000\ncommitter t <t> 0 +0000\n\n"+intent), 0o644); err != nil {
			t.Fatal(err)
		}
		request := testrepo.Git(t, dir, "hash-object", "-t", "commit", "-w", raw)
		_, stderr := c.push(dir, "origin", request+":refs/for/tally/claim-next")
		if !strings.Contains(stderr, tc.want) {
			t.Fatalf("%s: want %q in the answer:\n%s", intent, tc.want, stderr)
		}
		objects, entries, deltas := strings.Count(stderr, "remote: tally-object "), strings.Count(stderr, "remote: tally-entry "), strings.Count(stderr, "remote: tally-delta ")
		switch tc.want {
		case "USAGE":
			if after := c.serverTip(); after != tip || objects+entries+deltas > 0 {
				t.Fatalf("%s: refused, yet the ledger moved from %s to %s or objects were sent:\n%s", intent, tip, after, stderr)
			}
		case "remote: tally-range 1 ":
			if objects == 0 || entries+deltas > 0 {
				t.Fatalf("%s: %d form 1 objects, %d entries and %d deltas sent, want form 1 only:\n%s", intent, objects, entries, deltas, stderr)
			}
		case "remote: tally-range 2 ":
			if entries == 0 || objects+deltas > 0 {
				t.Fatalf("%s: %d form 1 objects, %d entries and %d deltas sent, want form 2 only:\n%s", intent, objects, entries, deltas, stderr)
			}
		default:
			if entries == 0 || deltas == 0 || objects > 0 {
				t.Fatalf("%s: %d form 1 objects, %d entries and %d deltas sent, want form 3:\n%s", intent, objects, entries, deltas, stderr)
			}
		}
	}
}

// TestSequencedSSH: over OpenSSH's sshd a sequenced claim costs one ssh
// connection, its request's push, once the clone has met the server (#32:
// each connection costs a key exchange, most of a claim's time over ssh).
// The first claim of a clone as a new user leaves it (no tally
// configuration) makes two: the fetch that finds the server's sequencer and
// verifies the ledger, then the request. Every later one is a single
// git-receive-pack: the server sends the entries since the clone's tip with
// its answer (receive-pack relays the hook's lines on the push's sideband
// over ssh as over git daemon and HTTP), so no fetch follows, and nothing
// else (no ls-remote, no retry). One agent claims alone, round after round,
// and others claim together in between; each clone's ssh command logs the
// git command of every connection it opens.
func TestSequencedSSH(t *testing.T) {
	t.Parallel()
	const rounds, together = 30, 4
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("ssh", rounds*(1+together))
	srv := gitserver.SSH(t, filepath.Dir(c.bare))
	dirs := c.agents(1 + together)
	logs := make([]string, len(dirs))
	for i, d := range dirs {
		logs[i] = sshCounting(t, srv, d)
	}
	claim := func(i int) testrepo.Result {
		return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	}
	seen := make([]int, len(dirs))
	for round := 0; round < rounds; round++ {
		out := append([]testrepo.Result{claim(0)}, netTogether(together, func(i int) testrepo.Result { return claim(1 + i) })...)
		want := []string{"git-receive-pack"}
		if round == 0 {
			want = []string{"git-upload-pack", "git-receive-pack"}
		}
		for i, p := range out {
			if p.Err != nil || p.Code != 0 {
				t.Fatalf("round %d %s: %s %v", round, netAgent(i), p, p.Err)
			}
			conns := sshConnections(t, logs[i], seen[i])
			seen[i] += len(conns)
			if !slices.Equal(conns, want) {
				t.Fatalf("round %d %s: the claim opened ssh connections for %v, want %v", round, netAgent(i), conns, want)
			}
		}
	}
	if n := pushedLedgerUpdates(t, c.bare); n != 2 {
		t.Fatalf("%d ledger updates were pushed, want 2 (init and plan): the claims did not go through the sequencer", n)
	}
}

// sshCounting makes srv origin of the clone dir, reached through an ssh
// command that appends the git command of each connection it opens
// (git-upload-pack, git-receive-pack) to a log, one a line, and then runs
// srv's own ssh command. It returns the log's path.
func sshCounting(t testing.TB, srv *gitserver.SSHServer, dir string) string {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "ssh")
	log := wrapper + ".log"
	// git runs it with ssh's arguments, the remote command last.
	script := "#!/bin/sh\nfor arg; do command=$arg; done\necho \"${command%% *}\" >> '" + log + "'\nexec " + srv.Command(srv.Key) + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, dir, "config", "core.sshCommand", wrapper)
	testrepo.Git(t, dir, "remote", "set-url", "origin", srv.URL+"/shared.git")
	return log
}

// sshConnections are the connections an sshCounting log holds after its
// first from.
func sshConnections(t testing.TB, log string, from int) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	conns := strings.Fields(string(b))
	return conns[min(from, len(conns)):]
}
