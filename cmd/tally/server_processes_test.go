package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/hooks"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestServerPushProcesses: what a push costs the server in processes, and
// that what was cut checks as much as before. Through a real git daemon
// whose git processes write trace2 events and whose PATH logs every tr:
// `tally hooks install --server` sets core.alternateRefsCommand, so no push
// (sequenced claims, a compare-and-swap claim, a code push) runs git
// for-each-ref under receive-pack's connectivity check, which still runs
// for every one of them; the pre-receive shim of a request-only push runs
// no tr. A raw push over the git protocol of a commit whose parent the
// server does not have is still refused by that check ("missing necessary
// objects") and stores no ref; a request beside a forged ledger commit is
// still refused whole by tally's pre-receive. hooks uninstall unsets the
// setting.
func TestServerPushProcesses(t *testing.T) {
	t.Parallel()
	trace := t.TempDir()
	wrap := t.TempDir()
	trLog := filepath.Join(t.TempDir(), "tr.log")
	realTr, err := exec.LookPath("tr")
	if err != nil {
		t.Skip("no tr on PATH: the shim before this change cannot run either")
	}
	os.WriteFile(filepath.Join(wrap, "tr"), []byte("#!/bin/sh\necho tr >>'"+trLog+"'\nexec '"+realTr+"' \"$@\"\n"), 0o755)
	c := newNetCluster(t, gitserver.GitDaemon, "GIT_TRACE2_EVENT="+trace, "PATH="+wrap+":"+os.Getenv("PATH"))
	if v, err := netGit(c.bare, nil, "config", hooks.AlternateRefsConfig); err != nil || strings.TrimSpace(v) != hooks.AlternateRefsNone {
		t.Fatalf("after hooks install --server, %s is %q (%v), want %q", hooks.AlternateRefsConfig, v, err, hooks.AlternateRefsNone)
	}
	seed := c.seeded("w", 8)
	dirs := c.agents(2)
	sequenced(t, dirs[0])
	const requests = 3
	for i := 0; i < requests; i++ {
		c.ok(dirs[0], netAgent(0), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
	}
	if b, _ := os.ReadFile(trLog); len(b) != 0 {
		t.Fatalf("the pre-receive shim ran tr for request-only pushes:\n%s", b)
	}
	c.ok(dirs[1], netAgent(1), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600") // compare-and-swap
	testrepo.Git(t, seed, "commit", "-q", "--allow-empty", "-m", "code")
	if exit, stderr := c.push(seed, "origin", "HEAD:refs/heads/code"); exit != 0 {
		t.Fatalf("code push: exit %d\n%s", exit, stderr)
	}

	// Every push so far (seed's root, init, plan, the requests, the claim,
	// the code push) was checked for connectivity, none with for-each-ref.
	checks, listings := 0, 0
	files, _ := os.ReadDir(trace)
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(trace, f.Name()))
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct{ Event, Hierarchy string }
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Event != "cmd_name" {
				continue
			}
			switch {
			case strings.HasSuffix(e.Hierarchy, "receive-pack/rev-list"):
				checks++
			case strings.Contains(e.Hierarchy, "receive-pack/") && strings.HasSuffix(e.Hierarchy, "/for-each-ref"):
				listings++
			}
		}
	}
	if pushes := 3 + requests + 2; checks < pushes || listings != 0 {
		t.Fatalf("server: %d connectivity checks (want at least %d pushes'), %d git for-each-ref under receive-pack (want 0)", checks, pushes, listings)
	}

	// A commit whose parent the server lacks, pushed raw: refused by git's
	// connectivity check.
	testrepo.Git(t, seed, "commit", "-q", "--allow-empty", "-m", "parent the server never gets")
	testrepo.Git(t, seed, "commit", "-q", "--allow-empty", "-m", "child")
	child := testrepo.Git(t, seed, "rev-parse", "HEAD")
	tree := testrepo.Git(t, seed, "rev-parse", "HEAD^{tree}")
	pack := exec.Command("git", "pack-objects", "--stdout", "-q")
	pack.Dir, pack.Env, pack.Stdin = seed, testrepo.Env(), strings.NewReader(child+"\n"+tree+"\n")
	packed, err := pack.Output()
	if err != nil {
		t.Fatalf("git pack-objects: %v", err)
	}
	report := rawPush(t, c.url, "0000000000000000000000000000000000000000 "+child+" refs/heads/orphan", packed)
	if !strings.Contains(report, "unpack ok") || !strings.Contains(report, "ng refs/heads/orphan missing necessary objects") || strings.Contains(c.lsRemote(), "refs/heads/orphan") {
		t.Fatalf("a push of a commit without its parent: the server reported\n%s\nand holds\n%s", report, c.lsRemote())
	}

	// pre-receive still refuses a forged ledger commit pushed beside a request.
	empty := testrepo.Git(t, dirs[0], "hash-object", "-t", "tree", "-w", "/dev/null")
	request := testrepo.Git(t, dirs[0], "commit-tree", empty, "-m", `{"actor":"agent-0","holder":{"host":"h","pid":1},"nonce":"00000000000000000000000000000001","op":"claim-next","ttl":0,"v":1}`)
	testrepo.Git(t, seed, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	tip := c.serverTip()
	forged := testrepo.Git(t, seed, "commit-tree", tip+"^{tree}", "-p", tip, "-m", "not an entry")
	testrepo.Git(t, seed, "fetch", "-q", dirs[0], request)
	before := c.lsRemote()
	if exit, stderr := c.push(seed, "origin", forged+":refs/tally/ledger", request+":refs/for/tally/claim-next"); exit == 0 || netFirstLine(stderr, "tally: refused refs/tally/ledger: ") == "" {
		t.Fatalf("a request beside a forged ledger commit: exit %d, want tally's refusal:\n%s", exit, stderr)
	}
	if after := c.lsRemote(); after != before {
		t.Fatalf("the refused push moved the server's refs:\n%s\n->\n%s", before, after)
	}

	// uninstall takes the setting back with the shims.
	if p := netRun(c.bin, c.bare, "server", nil, "hooks", "uninstall"); p.Code != 0 {
		t.Fatalf("hooks uninstall: %s", p)
	}
	if v, err := netGit(c.bare, nil, "config", hooks.AlternateRefsConfig); err == nil {
		t.Fatalf("after hooks uninstall, %s is still %q", hooks.AlternateRefsConfig, v)
	}
}

// rawPush speaks git's receive-pack protocol (v0, report-status) over the
// git:// URL url: one command and the pack bytes, as no git client would
// send them (git push packs every object the server lacks). It returns the
// server's report.
func rawPush(t *testing.T, url, command string, pack []byte) string {
	t.Helper()
	hostPath := strings.TrimPrefix(url, "git://")
	host, path, _ := strings.Cut(hostPath, "/")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
	fmt.Fprint(conn, pkt("git-receive-pack /"+path+"\x00host="+host+"\x00"))
	r := bufio.NewReader(conn)
	for { // the ref advertisement, up to its flush
		var n int
		head := make([]byte, 4)
		if _, err := io.ReadFull(r, head); err != nil {
			t.Fatalf("reading the advertisement: %v", err)
		}
		if _, err := fmt.Sscanf(string(head), "%04x", &n); err != nil || n == 0 {
			break
		}
		if _, err := io.ReadFull(r, make([]byte, n-4)); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprint(conn, pkt(command+"\x00report-status")+"0000")
	conn.Write(pack)
	out, _ := io.ReadAll(r)
	return string(out)
}
