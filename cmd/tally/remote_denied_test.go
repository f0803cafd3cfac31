package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestRemoteDenied: servers that refuse who is asking — HTTP 401 for wrong
// credentials, HTTP 403 (with an HTML error page) for a user who may fetch
// but not push, a git daemon that does not enable receive-pack, a git daemon
// whose access hook refuses pushes, and a gitolite-style update hook that
// says DENIED — give REMOTE-DENIED, exit 2, not retryable (an agent must not
// retry them forever), with the server's words as plain text, and nothing
// moves on the server. A user the server does let push claims through the
// same server, so the refusal is the server's, not tally's.
func TestRemoteDenied(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	open := gitserver.Daemon(t, root)
	c := &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, url: open + "/shared.git", bin: testrepo.Tally(t)}
	seed := c.seeded("w", 4)

	users := map[string]string{"alice": "pw-alice", "bob": "pw-bob"}
	web := gitserver.HTTPAuthPushers(t, root, users, map[string]bool{"alice": true})
	as := func(user, pass string) string {
		return strings.Replace(web, "http://", "http://"+user+":"+pass+"@", 1) + "/shared.git"
	}
	readOnly := gitserver.DaemonWith(t, root, gitserver.DaemonOptions{ReadOnly: true}) + "/shared.git"
	hook := filepath.Join(t.TempDir(), "access-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n[ \"$1\" = receive-pack ] || exit 0\necho 'read-only mirror: push to the primary'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mirror := gitserver.DaemonWith(t, root, gitserver.DaemonOptions{AccessHook: hook}) + "/shared.git"

	// alice may push through the web server.
	c.ok(seed, "alice", nil, "--remote", as("alice", "pw-alice"), "claim", "w/c000")

	denied := func(what string, words []string, args ...string) {
		t.Helper()
		before := c.serverTip()
		p := c.refused(2, "REMOTE-DENIED", seed, "bob", nil, args...)
		msg, _ := p.ErrorField("message").(string)
		for _, w := range words {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: %s\nwant the server's words %q in the message", what, p, w)
			}
		}
		if strings.ContainsAny(msg, "<>") {
			t.Fatalf("%s: message carries markup: %q", what, msg)
		}
		if after := c.serverTip(); after != before {
			t.Fatalf("%s: server ledger moved from %s to %s", what, before, after)
		}
		t.Logf("%s: %s", what, msg)
	}
	denied("401 on claim", []string{"authentication required"}, "--remote", as("alice", "wrong"), "claim", "w/c001")
	denied("401 on status", []string{"authentication required"}, "--remote", as("alice", "wrong"), "status")
	if _, err := exec.LookPath("curl"); err != nil {
		testrepo.Missing(t, "curl is not on PATH (apt-get install curl): tally reads an HTTP error page with it")
	}
	denied("403 on claim", []string{"403 Forbidden", "push access is for maintainers only"}, "--remote", as("bob", "pw-bob"), "claim", "w/c001")
	denied("read-only daemon", []string{"service not enabled"}, "--remote", readOnly, "claim", "w/c001")
	denied("access hook", []string{"read-only mirror: push to the primary"}, "--remote", mirror, "claim", "w/c001")

	// gitolite checks writes in its update hook and says DENIED there.
	update := filepath.Join(bare, "hooks", "update")
	if err := os.WriteFile(update, []byte("#!/bin/sh\necho \"FATAL: W $1 shared ${REMOTE_USER:-daemon} DENIED by fallthru\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	denied("gitolite DENIED", []string{"DENIED by fallthru"}, "--remote", c.url, "claim", "w/c001")
}
