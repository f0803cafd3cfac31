package main

// tally report rendered in real headless Chromium, and tally audit on a
// range, both over ledgers built with the real CLI in real repositories.

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// xssNote and xssReason are attacker-written entry text: if either became
// markup, the DOM would gain a script or an img element.
const (
	xssNote   = `</script><script>document.title='pwned'</script><img src=x onerror="document.title='pwned'">`
	xssReason = `<img src=x onerror="document.title='pwned'"><svg onload="document.title='pwned'">`
)

// auditLedger builds a ledger with a dead-holder takeover (a reaped pid), an
// expired takeover, renewals, a receipt whose evidence shows a failed
// command, a fail with a reason, a preempted path lock and an attacker's
// note. Code commits get committer dates on the ledger's clock.
func auditLedger(t *testing.T) (r *repo, workCommit string) {
	r = newRepo(t).at(0)
	r.ok("lead", "init")
	r.ok("lead", "plan", r.file("p.json", `{"wave":"build","cells":[{"id":"schema","paths":["src/schema/**"]},{"id":"api"},{"id":"cli"},{"id":"docs"}]}`))
	r.ok("lead", "policy", "set-roles", "lead=10", "dev=1")
	r.ok("lead", "policy", "set-actors", "lead=lead", "dave=dev")
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	r.ok("alice", "claim", "build/schema", "--pid", fmt.Sprint(gone.Process.Pid), "--ttl", "600")
	r.ok("carol", "claim", "build/api", "--ttl", "60")
	r.ok("dave", "lock", "docs/**", "--ttl", "600", "--reason", "rewrite")
	r.at(time.Minute)
	if res := r.ok("bob", "claim", "build/schema", "--reclaim-dead"); res["takeover"] != "dead-holder" {
		t.Fatalf("reclaim-dead: %v", res)
	}
	r.ok("bob", "renew", "build/schema", "--epoch", "2", "--ttl", "600")
	r.at(3 * time.Minute)
	if res := r.ok("bob", "claim", "build/api"); res["takeover"] != "expired" {
		t.Fatalf("claim after expiry: %v", res)
	}
	r.ok("lead", "lock", "docs/**", "--ttl", "120") // preempts dave: lead's role is higher
	r.at(4 * time.Minute)
	r.ok("bob", "renew", "build/schema", "--epoch", "2", "--ttl", "600")
	if res := testrepo.Run(t, r.dir, "bob", r.env(), "run", "build/schema", "--epoch", "2", "--", "false"); res.Code != 2 {
		t.Fatalf("tally run false: exit %d, %s", res.Code, res.Stderr)
	}
	workCommit = r.commitAt(4*time.Minute, "schema work", "src/schema/a.go")
	r.ok("bob", "done", "build/schema", "--epoch", "2")
	r.at(5 * time.Minute)
	r.ok("bob", "fail", "build/api", "--epoch", "2", "--reason", xssReason)
	r.ok("mallory", "note", xssNote)
	return r, workCommit
}

// commitAt commits files with the committer date cliT0 + d.
func (r *repo) commitAt(d time.Duration, msg string, files ...string) string {
	r.t.Helper()
	for _, f := range files {
		r.file(f, msg+"\n")
		r.git("add", f)
	}
	cmd := exec.Command("git", "commit", "-q", "-m", msg)
	cmd.Dir, cmd.Env = r.dir, testrepo.Env("GIT_COMMITTER_DATE="+tsAt(d), "GIT_AUTHOR_DATE="+tsAt(d))
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git commit: %v %s", err, out)
	}
	return r.git("rev-parse", "HEAD")
}

// chromium returns the browser to test with: skipped when absent, except
// under CI=true, where a missing browser fails the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testrepo.Missing(t, "chromium not found on PATH: install it (apt-get install chromium) to run the browser test")
	return ""
}

// browse loads url in headless Chromium with a fresh profile and nothing that
// reaches the network, and returns the DOM after the page's script ran. With
// shot, it also writes a screenshot there.
func browse(t *testing.T, bin, url, shot string) string {
	t.Helper()
	argv := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--window-size=1400,900"}
	if shot != "" {
		argv = append(argv, "--screenshot="+shot)
	} else {
		argv = append(argv, "--dump-dom")
	}
	cmd := exec.Command(bin, append(argv, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return stdout.String()
}

func TestReportInChromium(t *testing.T) {
	bin := chromium(t)
	r, _ := auditLedger(t)
	out := filepath.Join(t.TempDir(), "report.html")
	res := r.ok("lead", "report", "--out", out)
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Self-contained: no reference to anything outside, and a policy that
	// forbids every fetch.
	if regexp.MustCompile(`(src|href|url)\s*[=(]\s*["']?(https?:|//|file:)`).Match(html) {
		t.Fatal("report refers to an external asset")
	}
	if !bytes.Contains(html, []byte(`content="default-src 'none';`)) {
		t.Fatal("report has no Content-Security-Policy forbidding fetches")
	}
	verify := r.ok("lead", "verify", "--full")
	root := verify["root"].(string)
	if res["root"] != root {
		t.Fatalf("report root %v, verify root %s", res["root"], root)
	}

	dom := browse(t, bin, "file://"+out, "")
	// The verification header, with the seq and root verify reports.
	head := fmt.Sprintf("Verified: entries 0 through seq %d", int(verify["head"].(map[string]any)["seq"].(float64)))
	for _, want := range []string{head, root,
		// lanes drawn by the script: one per cell, grouped by wave, and the lock
		`class="lane-label">build/schema<`, `class="lane-label">build/api<`, `class="lane-label">build/docs<`,
		`class="lane-label">lock docs/**<`,
		// takeovers marked on the timeline, naming the prior holder
		"<title>dead-holder takeover from alice epoch 1</title>", "<title>expired takeover from carol epoch 1</title>",
		"<title>preempt takeover from dave epoch 1</title>",
		// renewals, and each kind of ending
		`class="renewal"`, `class="bar done"`, `class="bar failed"`, `class="bar taken"`, `class="bar expired"`, `class="bar preempted"`,
		// the per-actor summary
		`<tr data-actor="alice">`, `<tr data-actor="bob">`, `<tr data-actor="carol">`, `<tr data-actor="dave">`, `<tr data-actor="lead">`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %q", want)
		}
	}
	inert := func(dom string) {
		t.Helper()
		if n := strings.Count(dom, "<script"); n != 2 {
			t.Errorf("DOM has %d script elements, want the report's 2", n)
		}
		for _, tag := range []string{"<img", "<svg onload"} {
			if strings.Contains(dom, tag) {
				t.Errorf("entry text became markup: DOM contains %q", tag)
			}
		}
		if !strings.Contains(dom, "<title>tally report</title>") {
			t.Errorf("entry text ran as script: the title changed")
		}
	}
	inert(dom)
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
	// The fail (its reason) and the note, opened by their #seq= links: shown
	// as text, still inert.
	log := r.ok("lead", "log")["entries"].([]any)
	seqOf := func(kind string) int {
		for _, e := range log {
			if m := e.(map[string]any); m["kind"] == kind {
				return int(m["seq"].(float64))
			}
		}
		t.Fatalf("no %s entry", kind)
		return 0
	}
	failDOM := browse(t, bin, fmt.Sprintf("file://%s#seq=%d", out, seqOf("fail")), "")
	if !strings.Contains(failDOM, "fail reason: &lt;img src=x onerror=") {
		t.Errorf("the fail's details do not show its reason as text:\n%s", failDOM)
	}
	inert(failDOM)
	noteDOM := browse(t, bin, fmt.Sprintf("file://%s#seq=%d", out, seqOf("note")), "")
	if !strings.Contains(noteDOM, "note: &lt;/script&gt;&lt;script&gt;document.title=") {
		t.Errorf("the note's details do not show its text:\n%s", noteDOM)
	}
	inert(noteDOM)
	doneDOM := browse(t, bin, fmt.Sprintf("file://%s#seq=%d", out, seqOf("done")), "")
	if !regexp.MustCompile(`class="mono receipt">receipt \(seq \d+\): commit [0-9a-f]{40}`).MatchString(doneDOM) ||
		!strings.Contains(doneDOM, "evidence: `false` exit 1") {
		t.Errorf("the done bar's details lack the receipt:\n%s", doneDOM)
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	browse(t, bin, "file://"+out, shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if b.Dx() != 1400 || len(colours) < 20 {
		t.Fatalf("screenshot %v has %d distinct colours: blank", b, len(colours))
	}
}

// TestReportVerifyFailure: a ledger whose entry was tampered with still gets
// a report, the failure first and nothing after it, and exit 3.
func TestReportVerifyFailure(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("lead", "init")
	r.ok("lead", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"a"}]}`))
	good := r.tip()
	r.ok("alice", "claim", "w/a")
	// mallory renews alice's lease: illegal (ACTOR-MISMATCH), yet well chained.
	forge(t, r.dir, "renew", "mallory", tsAt(time.Minute), map[string]any{"wave": "w", "cell": "a", "epoch": 1, "ttl": 60}, false)
	out := filepath.Join(t.TempDir(), "report.html")
	res := r.run("lead", "report", "--out", out)
	if res.Code != 3 {
		t.Fatalf("report of a broken ledger: exit %d, %s", res.Code, res.Stdout)
	}
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(html)
	i, j := strings.Index(s, "VERIFICATION FAILED at seq 3: RULE-VIOLATION"), strings.Index(s, `id="tally-data"`)
	if i < 0 || j < i || !strings.Contains(s, "only the 3 entries before the failure") || !strings.Contains(s, "alice") {
		t.Fatalf("report of a ledger failing at seq 3 (good through %s):\n%s", good, s)
	}
}

// TestAudit: a range with an unreceipted commit, a receipt whose evidence
// shows a failed command and a takeover lists all three; with receipts
// enforced on the ref, exit 2 AUDIT-FAILED; leases that lapsed are listed.
func TestAudit(t *testing.T) {
	r, work := auditLedger(t)
	base := r.git("rev-parse", "HEAD~1")
	stray := r.commitAt(5*time.Minute, "unreceipted", "src/other.go")
	rng := base + "..HEAD"
	res := r.ok("lead", "audit", "--ref", "refs/heads/main", rng)
	un := arr(t, res, "unreceipted")
	if len(un) != 1 || un[0].(map[string]any)["commit"] != stray {
		t.Errorf("unreceipted: %v, want only %s", un, stray)
	}
	fe := arr(t, res, "failed_evidence")
	if len(fe) != 1 || fe[0].(map[string]any)["commit"] != work || fe[0].(map[string]any)["exit_code"] != 1.0 ||
		fe[0].(map[string]any)["argv"] != "false" {
		t.Errorf("failed evidence: %v, want `false` exit 1 on %s", fe, work)
	}
	var kinds []string
	for _, x := range arr(t, res, "takeovers") {
		m := x.(map[string]any)
		kinds = append(kinds, fmt.Sprint(m["kind"], " ", m["lane"], " from ", m["prior"]))
	}
	// The period starts at the base commit (cliT0): every takeover is in it.
	want := []string{"dead-holder build/schema from alice", "expired build/api from carol", "preempt lock docs/** from dave"}
	if strings.Join(kinds, "; ") != strings.Join(want, "; ") {
		t.Errorf("takeovers: %v, want %v", kinds, want)
	}
	var expired []string
	for _, x := range arr(t, res, "expired") {
		m := x.(map[string]any)
		expired = append(expired, fmt.Sprint(m["lane"], " ", m["actor"], " ", m["expired_at"]))
	}
	if len(expired) != 1 || expired[0] != "build/api carol "+tsAt(time.Minute) {
		t.Errorf("expired: %v", expired)
	}
	if m := arr(t, res, "missing"); len(m) != 0 {
		t.Errorf("missing without an enforcing policy: %v", m)
	}
	// A range after the takeovers, from the work commit: none in its period.
	if tk := arr(t, r.ok("lead", "audit", "--ref", "refs/heads/main", work+"..HEAD"), "takeovers"); len(tk) != 0 {
		t.Errorf("takeovers after %s: %v", tsAt(4*time.Minute), tk)
	}

	r.ok("lead", "policy", "set", "--receipts", "enforce", "--protected", "refs/heads/main")
	e := r.refuse(2, "AUDIT-FAILED", "lead", "audit", "--ref", "refs/heads/main", rng)
	if un := arr(t, obj(t, e, "audit"), "unreceipted"); len(un) != 1 {
		t.Errorf("AUDIT-FAILED details: %v", e)
	}
	// The same range judged for an unprotected ref passes, findings listed.
	if un := arr(t, r.ok("lead", "audit", "--ref", "refs/heads/topic", rng), "unreceipted"); len(un) != 1 {
		t.Errorf("unprotected ref: %v", un)
	}
	// Text output names all three.
	text := testrepo.Run(t, r.dir, "lead", r.env(), "audit", "--ref", "refs/heads/main", rng)
	for _, w := range []string{stray + " unreceipted", "`false` exited 1", "dead-holder by bob from alice epoch 1", "MISSING: 1 commits without a receipt"} {
		if !strings.Contains(text.Stdout, w) {
			t.Errorf("audit text lacks %q:\n%s", w, text.Stdout)
		}
	}
	if text.Code != 2 || !strings.Contains(text.Stderr, "AUDIT-FAILED") {
		t.Errorf("audit text: exit %d, stderr %s", text.Code, text.Stderr)
	}
}

// TestAuditUnsignedEntries: once the policy requires signatures, the
// unsigned entries in the period fail the audit (exit 2); a period after them
// passes.
func TestAuditUnsignedEntries(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("lead", "init")
	r.ok("lead", "note", "before signatures")
	key := filepath.Join(t.TempDir(), "lead")
	r.ok("lead", "keys", "generate", "--out", key)
	r.ok("lead", "keys", "add", "lead", "@"+key+".pub")
	r.at(time.Minute)
	r.ok("lead", "--sign-key", key, "policy", "set", "--require-signatures", "--admins", "lead")
	r.at(2*time.Minute).ok("lead", "--sign-key", key, "note", "signed")
	r.commitAt(2*time.Minute, "work", "a.go")
	e := r.refuse(2, "AUDIT-FAILED", "lead", "audit", "--ref", "refs/heads/main", "HEAD~1..HEAD")
	var seqs []string
	for _, u := range arr(t, obj(t, e, "audit"), "unsigned") {
		seqs = append(seqs, fmt.Sprint(u.(map[string]any)["seq"]))
	}
	if strings.Join(seqs, " ") != "0 1 2" {
		t.Fatalf("unsigned entries %v, want the three before the policy", seqs)
	}
	res := r.ok("lead", "audit", "--ref", "refs/heads/main", "--since", tsAt(time.Minute), "HEAD~1..HEAD")
	if u := arr(t, res, "unsigned"); len(u) != 0 {
		t.Fatalf("unsigned after the policy: %v", u)
	}
}
