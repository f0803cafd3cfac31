package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// The sequencer's hardening (FORMAT.md §9b): the server never signs for a
// requester, a request and an answer are bounded, and an answer is bound
// to its request by the request's nonce.

// maxRSS is a test's bound on a process's peak resident memory, in KiB:
// several times what tally uses for a claim (about 20 MiB), far below what
// keeping a flood or reading a 256 MiB request costs.
const maxRSS = 100 << 10

// measured returns a program that runs bin under /usr/bin/time, which
// writes the peak resident memory (KiB) of the run to the file named by
// $RSS_OUT; rss reads it back. It skips the test without /usr/bin/time.
func measured(t *testing.T, bin string) (wrapper string, rss func(file string) int) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		testrepo.Missing(t, "/usr/bin/time (Debian package time) measures peak memory")
	}
	wrapper = filepath.Join(t.TempDir(), "measured")
	script := "#!/bin/sh\nexec /usr/bin/time -f %M -o \"$RSS_OUT\" '" + bin + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, func(file string) int {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("peak memory not measured: %v", err)
		}
		lines := strings.Fields(string(b))
		kb, err := strconv.Atoi(lines[len(lines)-1])
		if err != nil {
			t.Fatalf("peak memory: %q", b)
		}
		return kb
	}
}

// TestSequencerNeverSigns: a server whose account has a signing key — in
// its git configuration (gpg.format=ssh, user.signingkey, as a developer's
// ~/.gitconfig often has) or in TALLY_SIGNING_KEY — refuses an anonymous
// request with SEQUENCER-SIGNS (exit 2), and appends nothing: it would
// have signed the requester's entry with its own key.
func TestSequencerNeverSigns(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		testrepo.Missing(t, "ssh-keygen makes the server's signing key")
	}
	for _, source := range []string{"gitconfig", "env"} {
		t.Run(source, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			key := filepath.Join(home, "id_ed25519")
			if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "server", "-f", key).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen: %v\n%s", err, out)
			}
			gitconfig := filepath.Join(home, ".gitconfig")
			env := []string{"HOME=" + home}
			if source == "gitconfig" {
				cfg := "[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = " + key + ".pub\n"
				if err := os.WriteFile(gitconfig, []byte(cfg), 0o644); err != nil {
					t.Fatal(err)
				}
				env = append(env, "GIT_CONFIG_GLOBAL="+gitconfig)
			} else {
				env = append(env, "TALLY_SIGNING_KEY="+key)
			}
			c := newNetCluster(t, gitserver.GitDaemon, env...)
			c.seeded("signs", 2)
			dir := c.agents(1)[0]
			sequenced(t, dir)
			before := len(netLedger(t, c.bare))
			c.refused(2, "SEQUENCER-SIGNS", dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
			if after := len(netLedger(t, c.bare)); after != before {
				t.Fatalf("the server's ledger went from %d to %d entries", before, after)
			}
		})
	}
}

// TestSequencedRequestTooLarge: a request of 256 MiB (a commit whose
// message is that long, pushed with plain git) is refused with
// LIMIT-EXCEEDED, and the sequencer that refuses it never holds it: its
// peak memory stays below maxRSS.
func TestSequencedRequestTooLarge(t *testing.T) {
	c, _, dir := sequencedAgent(t, "large", 2)
	wrapper, rss := measured(t, c.bin)
	out := filepath.Join(t.TempDir(), "rss")
	wrapSequencer(t, c.bare, func(real string) string {
		return "#!/bin/sh\nRSS_OUT='" + out + "' exec '" + wrapper + "' hook proc-receive\n"
	})
	msg := filepath.Join(t.TempDir(), "commit")
	f, err := os.Create(msg)
	if err != nil {
		t.Fatal(err)
	}
	empty := testrepo.Git(t, dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	fmt.Fprintf(f, "tree %s\nauthor t <t> 1 +0000\ncommitter t <t> 1 +0000\n\n", empty)
	line := strings.Repeat("x", 1<<20-1) + "\n"
	for i := 0; i < 256; i++ {
		f.WriteString(line)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	big := testrepo.Git(t, dir, "hash-object", "-t", "commit", "-w", msg)
	os.Remove(msg)
	before := len(netLedger(t, c.bare))
	got, err := netGit(dir, nil, "push", "--porcelain", "origin", big+":refs/for/tally/claim-next")
	if err == nil || !strings.Contains(got, "tally LIMIT-EXCEEDED: ") {
		t.Fatalf("a 256 MiB request: want LIMIT-EXCEEDED, got %s %v", got, err)
	}
	if kb := rss(out); kb > maxRSS {
		t.Fatalf("the sequencer peaked at %d KiB refusing a 256 MiB request, want at most %d", kb, maxRSS)
	} else {
		t.Logf("the sequencer peaked at %d KiB", kb)
	}
	if after := len(netLedger(t, c.bare)); after != before {
		t.Fatalf("the server's ledger went from %d to %d entries", before, after)
	}
}

// TestSequencedLongRefusal: a refusal whose reason is longer than a
// pkt-line (an intent with a 33,000-byte op, pushed to a ref of that op,
// is refused with a message naming both) reaches the pusher as the code,
// cut, instead of git's "proc-receive failed to report status".
func TestSequencedLongRefusal(t *testing.T) {
	_, _, dir := sequencedAgent(t, "long", 2)
	op := strings.Repeat("o", 33000)
	intent := `{"actor":"agent-0","holder":{"host":"h","pid":1},"nonce":"` + strings.Repeat("a", 32) + `","op":"` + op + `","ttl":0,"v":2}`
	empty := testrepo.Git(t, dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	// the intent exactly as the message (commit-tree would add a line break)
	raw := filepath.Join(t.TempDir(), "request")
	if err := os.WriteFile(raw, []byte("tree "+empty+"\nauthor t <t> 0 +0000\ncommitter t <t> 0 +0000\n\n"+intent), 0o644); err != nil {
		t.Fatal(err)
	}
	commit := testrepo.Git(t, dir, "hash-object", "-t", "commit", "-w", raw)
	got, err := netGit(dir, nil, "push", "--porcelain", "origin", commit+":refs/for/tally/"+op)
	if err == nil || !strings.Contains(got, "[remote rejected] (tally USAGE: unsupported request") {
		t.Fatalf("a refusal longer than a pkt-line: %.300s %.300v", got, err)
	}
}

// hostileSequencer replaces the bare repository's sequencer with a shell
// script: body runs after the script has read the request's version
// lines and answered them, then read the commands ($ref is the last one's
// ref), with the protocol's input still open.
func hostileSequencer(t *testing.T, bare, body string) {
	t.Helper()
	wrapSequencer(t, bare, func(string) string {
		return `#!/bin/sh
block() {
	while :; do
		len=$(dd bs=1 count=4 2>/dev/null)
		[ "$len" != 0000 ] || return 0
		[ -n "$len" ] || exit 1
		line=$(dd bs=1 count=$((0x$len - 4)) 2>/dev/null)
		set -- $line
		ref=$3
	done
}
block
printf '000eversion=1'; printf '\0'; printf '0000'
block
` + body
	})
}

// TestSequencedHostileServer: a server that floods its answer with junk
// (1 GiB on the side band, over git daemon: tally's own push), or trickles
// it (a byte a second for 40 s, far longer than the request's bound; over
// git daemon and smart HTTP, git's push), against the real client: it keeps a
// bounded amount (peak memory below maxRSS), gives up within its bound
// (tally.requestTimeout, 3 s here, and the fetch that looks for its entry
// after), reports REMOTE-UNREACHABLE, and claims nothing it was not given.
func TestSequencedHostileServer(t *testing.T) {
	bodies := map[string]string{
		"flood":   "head -c 1073741824 /dev/zero >&2\n",
		"trickle": "for i in $(seq 40); do printf x >&2; sleep 1; done\n",
	}
	for _, kind := range gitserver.Kinds {
		for name, body := range bodies {
			if kind == gitserver.SmartHTTP && name == "flood" {
				// The test's web server (net/http/cgi) stops reading a
				// CGI program whose client left and waits for it to exit,
				// which receive-pack, blocked writing the rest of the
				// flood, never does. GitRun.MaxOutput, which bounds the
				// flood there, has its own test (TestGitRunMaxOutput).
				continue
			}
			t.Run(string(kind)+"/"+name, func(t *testing.T) {
				t.Parallel()
				c := newNetCluster(t, kind)
				c.seeded("hostile", 2)
				dir := c.agents(1)[0]
				sequenced(t, dir)
				testrepo.Git(t, dir, "config", "tally.requestTimeout", "3")
				hostileSequencer(t, c.bare, body)
				wrapper, rss := measured(t, c.bin)
				out := filepath.Join(t.TempDir(), "rss")
				start := time.Now()
				p := netRun(wrapper, dir, netAgent(0), []string{"RSS_OUT=" + out}, "--remote", "origin", "claim", "--next", "--ttl", "3600")
				took := time.Since(start)
				if p.Err != nil || p.Code != 1 || p.ErrorCode() != "REMOTE-UNREACHABLE" {
					t.Fatalf("%s %v: want REMOTE-UNREACHABLE", p, p.Err)
				}
				if kb := rss(out); kb > maxRSS {
					t.Fatalf("the client peaked at %d KiB, want at most %d", kb, maxRSS)
				}
				// The trickle would hold it 40 s, the flood until 1 GiB
				// has passed; a fetch after the 3 s bound takes a second or
				// two even on a loaded machine.
				if took > 30*time.Second {
					t.Fatalf("the client took %v", took)
				}
				t.Logf("%s: REMOTE-UNREACHABLE after %v", name, took.Round(time.Millisecond))
			})
		}
	}
}

// TestSequencedOldGrant: a server that answers a request with the grant it
// gave an earlier request (its answer and range replayed byte for byte) is
// not believed: that entry carries the earlier request's nonce, so the
// client reports the outcome unknown (REMOTE-UNREACHABLE) rather than
// someone else's cell, although the two requests came from one clone and
// one actor with the same holder fields. The first grant stands as given.
func TestSequencedOldGrant(t *testing.T) {
	c, _, dir := sequencedAgent(t, "old", 4)
	saved := filepath.Join(c.bare, "saved")
	wrapSequencer(t, c.bare, func(real string) string {
		return `#!/bin/sh
if [ ! -f '` + saved + `.out' ]; then
	'` + real + `' "$@" 2>'` + saved + `.err' | tee '` + saved + `.tmp'
	cat '` + saved + `.err' >&2
	mv '` + saved + `.tmp' '` + saved + `.out'
	exit 0
fi
cat '` + saved + `.err' >&2
cat '` + saved + `.out'
cat >/dev/null
`
	})
	first := c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	p := c.run(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	if p.Code == 0 {
		t.Fatalf("the replayed grant of %v/%v was believed: %s", first["wave"], first["cell"], p)
	}
	if p.Code != 1 || p.ErrorCode() != "REMOTE-UNREACHABLE" {
		t.Fatalf("%s: want REMOTE-UNREACHABLE", p)
	}
	if claims := netClaims(t, c.bare); len(claims) != 1 {
		t.Fatalf("claims of %d cells in the server's ledger, want the first only", len(claims))
	}
}

// TestSequencedReplayRefused: the same request pushed twice (one commit,
// one nonce) is served once: the second push is refused with
// REQUEST-REPLAYED, and the server's ledger holds one claim for it, whose
// entry carries the request's nonce.
func TestSequencedReplayRefused(t *testing.T) {
	c, _, dir := sequencedAgent(t, "replay", 4)
	nonce := "0123456789abcdef0123456789abcdef"
	intent := `{"actor":"agent-0","holder":{"host":"h","pid":1},"nonce":"` + nonce + `","op":"claim-next","ttl":0,"v":2}`
	empty := testrepo.Git(t, dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	raw := filepath.Join(t.TempDir(), "request")
	if err := os.WriteFile(raw, []byte("tree "+empty+"\nauthor t <t> 0 +0000\ncommitter t <t> 0 +0000\n\n"+intent), 0o644); err != nil {
		t.Fatal(err)
	}
	request := testrepo.Git(t, dir, "hash-object", "-t", "commit", "-w", raw)
	if exit, stderr := c.push(dir, "origin", request+":refs/for/tally/claim-next"); exit != 0 {
		t.Fatalf("the first push of the request: exit %d\n%s", exit, stderr)
	}
	exit, stderr := c.push(dir, "origin", request+":refs/for/tally/claim-next")
	if exit == 0 || !strings.Contains(stderr, "tally REQUEST-REPLAYED: ") {
		t.Fatalf("the request pushed again: exit %d, want REQUEST-REPLAYED\n%s", exit, stderr)
	}
	if claims := netClaims(t, c.bare); len(claims) != 1 {
		t.Fatalf("claims of %d cells in the server's ledger, want 1", len(claims))
	}
	last := readLedger(t, c.bare)
	if got := last[len(last)-1].Entry.Nonce; got != nonce {
		t.Fatalf("the request's entry has nonce %s, want the request's %s", got, nonce)
	}
}

// TestSequencedByDefault: a new clone with no tally configuration sends
// even its first claim --next to the sequencer of a server that offers one
// (hooks install --server publishes refs/tally/sequencer): no entry is
// pushed, and tally status and tally remote show say so and why; with
// tally.sequencer=false it pushes its claim itself. Against a bare
// repository without tally's hooks, a new clone uses compare-and-swap and
// says the remote offers no sequencer.
func TestSequencedByDefault(t *testing.T) {
	t.Parallel()
	path := func(c *netCluster, dir, actor, want string) {
		t.Helper()
		for _, args := range [][]string{{"status"}, {"remote", "show"}} {
			res := c.ok(dir, actor, nil, append([]string{"--remote", "origin"}, args...)...)
			claims, _ := res["claims"].(map[string]any)
			if claims["path"] != want || claims["why"] == "" {
				t.Fatalf("%v: claims %v, want path %s with why", args, res["claims"], want)
			}
		}
	}
	t.Run("offered", func(t *testing.T) {
		c := newNetCluster(t, gitserver.GitDaemon)
		c.seeded("default", 4)
		dir := c.agents(1)[0]
		c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		if n := pushedLedgerUpdates(t, c.bare); n != 2 {
			t.Fatalf("%d ledger updates were pushed, want 2 (init and plan): a new clone's claims did not go to the sequencer", n)
		}
		path(c, dir, netAgent(0), "sequenced")
		testrepo.Git(t, dir, "config", "tally.sequencer", "false")
		path(c, dir, netAgent(0), "compare-and-swap")
		c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		if n := pushedLedgerUpdates(t, c.bare); n != 3 {
			t.Fatalf("%d ledger updates were pushed, want 3: tally.sequencer=false did not opt out", n)
		}
	})
	t.Run("hookless", func(t *testing.T) {
		root := t.TempDir()
		bare := filepath.Join(root, "plain.git")
		testrepo.Git(t, root, "init", "-q", "--bare", "-b", "main", bare)
		testrepo.Git(t, bare, "config", "core.logAllRefUpdates", "always")
		c := &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, url: gitserver.Daemon(t, root) + "/plain.git", bin: testrepo.Tally(t)}
		c.seeded("plain", 2)
		dir := c.agents(1)[0]
		c.ok(dir, netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		if n := pushedLedgerUpdates(t, c.bare); n != 3 {
			t.Fatalf("%d ledger updates were pushed, want 3 (init, plan and the claim)", n)
		}
		path(c, dir, netAgent(0), "compare-and-swap")
	})
}

// signalWriter closes seen the first time a write holds text (a server's
// log line; writes are whole lines).
type signalWriter struct {
	text string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.text) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestConnectionLimitRetried: a git daemon at its connection limit (1
// here, taken by a connection that says nothing) drops tally's connections
// unanswered; tally tries again with backoff, and once the connection is
// freed — after the daemon has logged dropping one of tally's — both a
// view's fetch and a sequenced claim's push succeed instead of failing
// REMOTE-UNREACHABLE.
func TestConnectionLimitRetried(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	t.Cleanup(func() { testrepo.WaitCompaction(t, bare) })
	base := gitserver.Daemon(t, root)
	c := &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, url: base + "/shared.git", bin: testrepo.Tally(t)}
	c.seeded("limit", 4)
	dir := c.agents(1)[0]
	sequenced(t, dir)
	c.ok(dir, netAgent(0), nil, "--remote", "origin", "status") // a record, so the claim below pushes without a fetch
	for _, args := range [][]string{{"status"}, {"claim", "--next", "--ttl", "3600"}} {
		log := &signalWriter{text: "Too many children, dropping connection", seen: make(chan struct{})}
		limitedURL := gitserver.DaemonWith(t, root, gitserver.DaemonOptions{MaxConnections: 1, Log: log}) + "/shared.git"
		testrepo.Git(t, dir, "remote", "set-url", "origin", limitedURL)
		hold, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(limitedURL, "git://"), "/shared.git"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan testrepo.Result, 1)
		go func() {
			done <- netRun(c.bin, dir, netAgent(0), nil, append([]string{"--remote", "origin"}, args...)...)
		}()
		select {
		case <-log.seen:
		case p := <-done:
			t.Fatalf("%v ended while the daemon's one connection was held: %s", args, p)
		}
		hold.Close()
		if p := <-done; p.Err != nil || p.Code != 0 {
			t.Fatalf("%v at the connection limit: %s %v", args, p, p.Err)
		}
	}
}

// TestSSHStartupLimitRetried: sshd past MaxStartups (1 here, taken by a
// connection that never says a word) resets a new connection before the
// key exchange, so nothing of a push reached git on the server. A claim's
// first network step is then its push (a sequenced request, or a
// compare-and-swap push when the clone's record of the remote is current):
// it is made again with backoff, and once the connection is freed — after
// sshd has logged dropping one of tally's — both succeed instead of failing
// REMOTE-UNREACHABLE.
func TestSSHStartupLimitRetried(t *testing.T) {
	t.Parallel()
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("ssh-limit", 4)
	dirs := c.agents(2)
	testrepo.Git(t, dirs[1], "config", "tally.sequencer", "false")
	for i, dir := range dirs {
		log := &signalWriter{text: "past MaxStartups", seen: make(chan struct{})}
		srv := gitserver.SSHWith(t, filepath.Dir(c.bare), gitserver.SSHOptions{Config: []string{"MaxStartups 1"}, Log: log})
		testrepo.Git(t, dir, "config", "core.sshCommand", srv.Command(srv.Key))
		testrepo.Git(t, dir, "remote", "set-url", "origin", srv.URL+"/shared.git")
		c.ok(dir, netAgent(i), nil, "--remote", "origin", "status") // a current record: the claim below pushes first
		hold, err := net.Dial("tcp", "127.0.0.1:"+srv.Port)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan testrepo.Result, 1)
		go func() {
			done <- netRun(c.bin, dir, netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
		}()
		select {
		case <-log.seen:
		case p := <-done:
			hold.Close()
			t.Fatalf("agent %d: the claim ended while sshd's one startup was held: %s", i, p)
		}
		hold.Close()
		if p := <-done; p.Err != nil || p.Code != 0 {
			t.Fatalf("agent %d: a claim past sshd's MaxStartups: %s %v", i, p, p.Err)
		}
	}
	if n := pushedLedgerUpdates(t, c.bare); n != 3 {
		t.Fatalf("%d ledger updates were pushed, want 3 (init, plan and the compare-and-swap claim): the default clone's claim was not sequenced", n)
	}
}

// TestSequencedSharedClone: agents in the worktrees of one clone share
// its tracking ref and its record of the remote, all sequenced, or half
// of them with compare-and-swap (tally.sequencer false in their worktree's
// own config). Each of 8 processes claims in a loop until the claims run
// out: every claim the server's ledger holds was reported granted to the
// process that asked (none reported as not applied, none reported twice;
// a compare-and-swap client may give up, CONFLICT, having applied nothing),
// no process exits 3 (no false rollback or fork), and the clone's
// tracking ref ends in the server's ledger. 96 claims here; TALLY_STRESS=1
// runs 500.
func TestSequencedSharedClone(t *testing.T) {
	t.Parallel()
	for _, mixed := range []bool{false, true} {
		t.Run(map[bool]string{false: "sequenced", true: "mixed"}[mixed], func(t *testing.T) {
			t.Parallel()
			sharedClone(t, mixed)
		})
	}
}

func sharedClone(t *testing.T, mixed bool) {
	agents, claims := 8, 96
	if netStress() {
		claims = 500
	}
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("shared", claims)
	clone := c.agents(1)[0]
	sequenced(t, clone) // whatever the default: this is the sequenced path
	testrepo.Git(t, clone, "config", "extensions.worktreeConfig", "true")
	dirs := []string{clone}
	for i := 1; i < agents; i++ {
		wt := filepath.Join(t.TempDir(), fmt.Sprintf("wt-%d", i))
		testrepo.Git(t, clone, "worktree", "add", "-q", "--detach", wt)
		if mixed && i%2 == 1 {
			testrepo.Git(t, wt, "config", "--worktree", "tally.sequencer", "false")
		}
		dirs = append(dirs, wt)
	}
	var mu sync.Mutex
	told := map[string]string{}
	var failures []string
	conflicts := 0
	var left atomic.Int64
	left.Store(int64(claims))
	netTogether(agents, func(i int) testrepo.Result {
		for left.Add(-1) >= 0 {
			p := netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
			mu.Lock()
			switch {
			case p.Err == nil && p.Code == 0:
				key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
				if prev, ok := told[key]; ok {
					failures = append(failures, fmt.Sprintf("%s reported granted to %s and %s", key, prev, netAgent(i)))
				}
				told[key] = netAgent(i)
			case mixed && p.Err == nil && p.Code == 1 && p.ErrorCode() == "CONFLICT":
				// A compare-and-swap client's retries ran out against the
				// sequencer's appends: retryable, nothing applied (which
				// the server's ledger must show).
				conflicts++
			default:
				failures = append(failures, p.String())
			}
			mu.Unlock()
		}
		return testrepo.Result{}
	})
	for _, f := range failures {
		t.Errorf("%.400s", f)
	}
	server := netClaims(t, c.bare)
	for cell, who := range server {
		if len(who) != 1 || told[cell] != who[0] {
			t.Errorf("%s: claimed on the server by %v, reported granted to %q", cell, who, told[cell])
		}
	}
	if len(server) != len(told) {
		t.Errorf("%d claims on the server, %d reported granted", len(server), len(told))
	}
	// The tracking ref may lag (the last process to move it need not be
	// the last to be answered), never lead nor leave the server's history.
	tracking, tip := testrepo.Git(t, clone, "rev-parse", "refs/remotes/origin/tally/ledger"), c.serverTip()
	if _, err := netGit(c.bare, nil, "merge-base", "--is-ancestor", tracking, tip); err != nil {
		t.Errorf("the clone's tracking ref is at %s, not in the server's ledger at %s", tracking, tip)
	}
	if refs := testrepo.Git(t, clone, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/tally/"); strings.Contains(refs, ".fetch-") {
		t.Errorf("fetches left their scratch refs:\n%s", refs)
	}
	t.Logf("%d agents in one clone: %d claims granted, %d compare-and-swap claims gave up (CONFLICT), %d failures", agents, len(told), conflicts, len(failures))
}

// TestSequencedPusherBeforeRead: while pushers are bound, an anonymous
// request is refused for its pusher (PUSHER-UNKNOWN) before it is read:
// a request over the size bound gets that refusal, not LIMIT-EXCEEDED.
func TestSequencedPusherBeforeRead(t *testing.T) {
	t.Parallel()
	c, seed, dir := sequencedAgent(t, "bound", 2)
	c.ok(seed, "planner", nil, "--remote", "origin", "policy", "set-pushers", "alice=alice")
	empty := testrepo.Git(t, dir, "hash-object", "-t", "tree", "-w", "/dev/null")
	raw := filepath.Join(t.TempDir(), "request")
	if err := os.WriteFile(raw, []byte("tree "+empty+"\nauthor t <t> 0 +0000\ncommitter t <t> 0 +0000\n\n"+strings.Repeat("x", 100<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	request := testrepo.Git(t, dir, "hash-object", "-t", "commit", "-w", raw)
	got, err := netGit(dir, nil, "push", "--porcelain", "origin", request+":refs/for/tally/claim-next")
	if err == nil || !strings.Contains(got, "tally PUSHER-UNKNOWN: ") {
		t.Fatalf("an anonymous request of 100 KiB with pushers bound: want PUSHER-UNKNOWN, got %s %v", got, err)
	}
}
