package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// Remote access exactly as git reaches it (#12 item 2): tally's network goes
// through the git CLI, so what the user's git configuration makes reachable
// — an ssh command, credential helpers, http.extraHeader,
// url.<base>.insteadOf — tally reaches too. Each test seeds a ledger through
// a plain git daemon and then works through the server under test; wrong
// credentials are REMOTE-DENIED (exit 2), and nothing moves on the server.

// gitConfigCluster is a netCluster whose ledger is seeded through git
// daemon, for tests that then reach the same repository another way.
func gitConfigCluster(t *testing.T) (c *netCluster, root, seed string) {
	root = t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	c = &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, url: gitserver.Daemon(t, root) + "/shared.git", bin: testrepo.Tally(t)}
	return c, root, c.seeded("w", 4)
}

// claimDoneSync claims cell through remote, records it done and syncs, each
// as actor in dir with env, and checks that the server's ledger took the
// claim and the done.
func (c *netCluster) claimDoneSync(dir, actor, remote, cell string, env ...string) {
	c.t.Helper()
	before := len(netLedger(c.t, c.bare))
	c.ok(dir, actor, env, "--remote", remote, "claim", "w/"+cell)
	c.ok(dir, actor, env, "--remote", remote, "done", "w/"+cell, "--epoch", "1") // a first claim's epoch
	c.ok(dir, actor, env, "sync", remote)
	got := netLedger(c.t, c.bare)
	if len(got) < before+2 {
		c.t.Fatalf("server ledger has %d entries after claim and done through %s, had %d", len(got), remote, before)
	}
	for _, e := range got[before:] {
		if e.cell() != "w/"+cell || e.Actor != actor || (e.Kind != "claim" && e.Kind != "done") {
			c.t.Fatalf("server entry %d is %s %s by %s, want claim/done of w/%s by %s", e.Seq, e.Kind, e.cell(), e.Actor, cell, actor)
		}
	}
}

// TestRemoteSSHCommand: a real sshd on 127.0.0.1, reached only through the
// user's ssh command — GIT_SSH_COMMAND, core.sshCommand, and an ssh
// configuration file naming a host alias — with a key file and a known_hosts
// file of its own: no agent, no SSH_AUTH_SOCK, no SSH_KNOWN_HOSTS, no
// ~/.ssh. Claim, done and sync work through it; a key the server does not
// accept is REMOTE-DENIED with ssh's words.
func TestRemoteSSHCommand(t *testing.T) {
	t.Parallel()
	c, root, _ := gitConfigCluster(t)
	srv := gitserver.SSH(t, root)
	url := srv.URL + "/shared.git"
	noAgent := []string{"SSH_AUTH_SOCK=", "SSH_KNOWN_HOSTS="}

	// GIT_SSH_COMMAND, the remote given as a URL.
	a := c.clone("a")
	c.claimDoneSync(a, "alice", url, "c000", append(noAgent, "GIT_SSH_COMMAND="+srv.Command(srv.Key))...)

	// core.sshCommand, the remote configured by name.
	b := c.clone("b")
	testrepo.Git(t, b, "config", "core.sshCommand", srv.Command(srv.Key))
	testrepo.Git(t, b, "remote", "add", "viassh", url)
	c.claimDoneSync(b, "bob", "viassh", "c001", noAgent...)

	// An ssh configuration file: the URL names a host alias only ssh knows.
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	conf := "Host tally-test-alias\n  HostName 127.0.0.1\n  Port " + srv.Port + "\n  User " + srv.User +
		"\n  IdentityFile " + srv.Key + "\n  IdentitiesOnly yes\n  IdentityAgent none\n  UserKnownHostsFile " + srv.KnownHosts +
		"\n  GlobalKnownHostsFile /dev/null\n  HostKeyAlias [127.0.0.1]:" + srv.Port + "\n  BatchMode yes\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	alias := "ssh://tally-test-alias" + strings.TrimPrefix(url, "ssh://"+srv.User+"@127.0.0.1:"+srv.Port)
	d := c.clone("d")
	c.claimDoneSync(d, "dora", alias, "c002", append(noAgent, "GIT_SSH_COMMAND=ssh -F "+cfg)...)

	// A key the server does not accept.
	before := c.serverTip()
	p := c.refused(2, "REMOTE-DENIED", a, "alice", append(noAgent, "GIT_SSH_COMMAND="+srv.Command(srv.WrongKey)), "--remote", url, "claim", "w/c003")
	if msg, _ := p.ErrorField("message").(string); !strings.Contains(msg, "Permission denied (publickey)") {
		t.Fatalf("%s\nwant ssh's words in the message", p)
	}
	if after := c.serverTip(); after != before {
		t.Fatalf("a refused key moved the server's ledger from %s to %s", before, after)
	}
}

// TestRemoteHTTPCredentials: a web server in front of git http-backend that
// wants HTTP basic credentials, reached with the password only in git's
// credential helper (credential.helper = store --file), not in the URL.
// Wrong credentials from the helper, and none at all (git would prompt; it
// must not), are REMOTE-DENIED, exit 2.
func TestRemoteHTTPCredentials(t *testing.T) {
	t.Parallel()
	c, root, _ := gitConfigCluster(t)
	web := gitserver.HTTPCheck(t, root, func(r *http.Request) bool {
		user, pass, ok := r.BasicAuth()
		return ok && user == "alice" && pass == "s3cret"
	})
	url := web + "/shared.git"
	helper := func(dir, pass string) {
		file := filepath.Join(t.TempDir(), "credentials")
		if err := os.WriteFile(file, []byte(strings.Replace(web, "http://", "http://alice:"+pass+"@", 1)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		testrepo.Git(t, dir, "config", "credential.helper", "store --file "+file)
	}

	a := c.clone("a")
	helper(a, "s3cret")
	c.claimDoneSync(a, "alice", url, "c000")

	before := c.serverTip()
	b := c.clone("b")
	helper(b, "wrong")
	p := c.refused(2, "REMOTE-DENIED", b, "bob", nil, "--remote", url, "claim", "w/c001")
	if msg, _ := p.ErrorField("message").(string); !strings.Contains(msg, "Authentication failed") {
		t.Fatalf("%s\nwant git's words in the message", p)
	}
	n := c.clone("n") // no credentials anywhere: git would prompt for them
	c.refused(2, "REMOTE-DENIED", n, "nobody", nil, "--remote", url, "claim", "w/c001")
	if after := c.serverTip(); after != before {
		t.Fatalf("refused credentials moved the server's ledger from %s to %s", before, after)
	}
}

// TestRemoteHTTPExtraHeader: a server that wants a bearer token, which git
// sends through http.extraHeader (as CI checkouts configure it), reached
// through a URL that only url.<base>.insteadOf turns into the server's.
func TestRemoteHTTPExtraHeader(t *testing.T) {
	t.Parallel()
	c, root, _ := gitConfigCluster(t)
	web := gitserver.HTTPCheck(t, root, func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer tally-test-token"
	})
	const fake = "https://git.example.invalid/team/"
	a := c.clone("a")
	testrepo.Git(t, a, "config", "url."+web+"/.insteadOf", fake)
	testrepo.Git(t, a, "config", "http.extraHeader", "Authorization: Bearer tally-test-token")
	c.claimDoneSync(a, "alice", fake+"shared.git", "c000")

	before := c.serverTip()
	testrepo.Git(t, a, "config", "http.extraHeader", "Authorization: Bearer wrong-token")
	c.refused(2, "REMOTE-DENIED", a, "alice", nil, "--remote", fake+"shared.git", "claim", "w/c001")
	if after := c.serverTip(); after != before {
		t.Fatalf("a wrong token moved the server's ledger from %s to %s", before, after)
	}
}
