package main

// Pushers bound to actors, over real servers: git http-backend behind a web
// server that authenticates with HTTP basic auth and sets REMOTE_USER
// (gitserver.HTTPAuth), and git daemon with the pusher variable in its
// environment. Attacks are plain `git push`es of entries written locally;
// honest writers use `tally --remote`.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// pusherCluster is one bare repository served by one server, reached by
// several URLs (one per pusher, with its credentials).
type pusherCluster struct {
	*netCluster
	urls map[string]string
}

// newPusherCluster serves a fresh bare repository over smart HTTP with
// basic auth for the users of pw (name to password; REMOTE_USER names the
// pusher), and anonymously under gitserver.AnonPrefix (who ""). Its URL is
// admin's: the one lsRemote lists through.
func newPusherCluster(t *testing.T, pw map[string]string) *pusherCluster {
	t.Helper()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	// The server's sequencer appends like a local writer, and so may start a
	// background compaction there: it ends before the directory goes.
	t.Cleanup(func() { testrepo.WaitCompaction(t, bare) })
	base := gitserver.HTTPAuth(t, root, pw)
	c := &pusherCluster{netCluster: &netCluster{t: t, kind: gitserver.SmartHTTP, bare: bare, bin: testrepo.Tally(t)},
		urls: map[string]string{"": base + gitserver.AnonPrefix + "/shared.git"}}
	for user, pass := range pw {
		c.urls[user] = strings.Replace(base, "http://", "http://"+user+":"+pass+"@", 1) + "/shared.git"
	}
	c.url = c.urls["admin"]
	return c
}

// as returns the cluster as seen through the URL of who.
func (c *pusherCluster) as(who string) *netCluster {
	cc := *c.netCluster
	cc.url = c.urls[who]
	return &cc
}

// syncLedger sets dir's local ledger to the server's, for an entry written
// with --local to be pushed with plain git.
func (c *pusherCluster) syncLedger(dir string) {
	c.t.Helper()
	testrepo.Git(c.t, dir, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	// The reset drops local entries the server refused: this clone's records
	// of what it wrote and verified go with them, or its writer would refuse
	// to build on the rolled-back ledger.
	for _, record := range []string{"appended", "verified"} {
		os.Remove(filepath.Join(dir, ".git", "tally", record))
	}
}

// acceptedPush pushes dir's ledger with plain git and requires the server to
// take it.
func (c *pusherCluster) acceptedPush(what, dir string) {
	c.t.Helper()
	if exit, stderr := c.push(dir, "origin", "refs/tally/ledger"); exit != 0 {
		c.t.Fatalf("%s: git push refused:\n%s", what, stderr)
	}
	if got, want := c.serverTip(), testrepo.Git(c.t, dir, "rev-parse", "refs/tally/ledger"); got != want {
		c.t.Fatalf("%s: server ledger at %s, pushed %s", what, got, want)
	}
}

// rejected runs an append through the server and requires REMOTE-REJECTED
// whose message carries every one of details.
func (c *netCluster) rejected(what, dir, actor string, details []string, args ...string) {
	c.t.Helper()
	p := c.refused(2, "REMOTE-REJECTED", dir, actor, nil, append([]string{"--remote", "origin"}, args...)...)
	msg, _ := p.ErrorField("message").(string)
	for _, d := range details {
		if !strings.Contains(msg, d) {
			c.t.Fatalf("%s: %s\nwant %q in the message", what, p, d)
		}
	}
}

func pubKey(t *testing.T) string {
	t.Helper()
	_, pub, err := identity.Generate("")
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// Over git http-backend behind basic auth: with pushers bound, alice's own
// entries are accepted; bob's credentials pushing an entry of alice, or an
// entry of the admin that rebinds bob in the same push, are refused
// (PUSHER-DENIED), and so is an anonymous push (PUSHER-UNKNOWN); a key for
// an actor nobody has used yet is refused to a pusher not bound to it, even
// an admin's, and accepted once a policy entry earlier in the same push binds
// it. Requiring signatures without admins is refused by the writer and, in a
// hand-built entry, by the server.
func TestPushersHTTP(t *testing.T) {
	t.Parallel()
	c := newPusherCluster(t, map[string]string{"admin": "pw-admin", "alice": "pw-alice", "bob": "pw-bob", "ops": "pw-ops"})
	seed := c.as("admin").clone("seed")
	admin := func(args ...string) map[string]any {
		t.Helper()
		return c.ok(seed, "admin", nil, append([]string{"--remote", "origin"}, args...)...)
	}
	admin("init")

	// Signatures required while anyone may change the policy: the writer
	// refuses, and so does the server when the entry is built by hand.
	c.refused(2, "POLICY", seed, "admin", nil, "--remote", "origin", "policy", "set", "--require-signatures")
	c.syncLedger(seed)
	yes := true
	forge(t, seed, "policy", "admin", netNowTS(0), lease.PolicySet{RequireSignatures: &yes}, false)
	c.pushRefused(seed, "require_signatures without admins", "RULE-VIOLATION", "POLICY", "require_signatures needs admins")
	c.syncLedger(seed)

	admin("policy", "set", "--admins", "admin,ops")
	admin("policy", "set-pushers", "admin=*", "alice=alice,alice-*", "bob=bob", "ops=ops")
	shown := admin("policy", "show")["policy"].(map[string]any)["pushers"]
	want := map[string]any{"admin": []any{"*"}, "alice": []any{"alice", "alice-*"}, "bob": []any{"bob"}, "ops": []any{"ops"}}
	if !reflect.DeepEqual(shown, want) {
		t.Fatalf("policy show: pushers %v, want %v", shown, want)
	}

	// alice's own entries, through tally and with plain git.
	alice := c.as("alice").clone("alice")
	c.ok(alice, "alice", nil, "--remote", "origin", "note", "alice's own")
	c.ok(alice, "alice-laptop", nil, "--remote", "origin", "note", "alice on another machine")
	c.syncLedger(alice)
	c.ok(alice, "alice", nil, "--local", "note", "pushed with git")
	c.acceptedPush("alice's entry with alice's credentials", alice)

	// bob's credentials, alice's entry.
	bob := c.as("bob").clone("bob")
	c.rejected("bob appends as alice", bob, "alice", []string{"PUSHER-DENIED", "pusher bob", "actor alice"}, "note", "by bob")
	c.syncLedger(bob)
	c.ok(bob, "alice", nil, "--local", "note", "by bob")
	c.pushRefused(bob, "bob pushes alice's entry", "PUSHER-DENIED", "pusher bob (REMOTE_USER) may not push entries of actor alice")
	// Rebinding in the same push does not help: the policy entry is judged by
	// the binding before it.
	c.syncLedger(bob)
	c.ok(bob, "admin", nil, "--local", "policy", "set-pushers", "bob=*")
	c.ok(bob, "alice", nil, "--local", "note", "by bob, after rebinding")
	c.pushRefused(bob, "bob rebinds himself and pushes alice's entry", "PUSHER-DENIED", "pusher bob (REMOTE_USER) may not push entries of actor admin")
	c.syncLedger(bob)
	c.ok(bob, "bob", nil, "--remote", "origin", "note", "bob's own")

	// No identity: the server lets anonymous users push, the hook does not.
	anon := c.as("").clone("anon")
	c.syncLedger(anon)
	c.ok(anon, "alice", nil, "--local", "note", "anonymous")
	c.pushRefused(anon, "anonymous push", "PUSHER-UNKNOWN", "the server named no pusher")

	// A key for carol, whom nobody has used yet.
	key := pubKey(t)
	c.rejected("bob registers carol's key as carol", bob, "carol", []string{"PUSHER-DENIED", "pusher bob", "actor carol"}, "keys", "add", "carol", key)
	ops := c.as("ops").clone("ops")
	c.syncLedger(ops)
	c.ok(ops, "ops", nil, "--local", "keys", "add", "carol", key)
	c.pushRefused(ops, "an admin's pusher not bound to carol registers her key", "PUSHER-DENIED", "pusher ops (REMOTE_USER) may not register keys for actor carol")
	// The same entries after ops binds itself to carol, in one push: each
	// entry is judged by the binding just before it.
	c.syncLedger(ops)
	c.ok(ops, "ops", nil, "--local", "policy", "set-pushers", "admin=*", "alice=alice,alice-*", "bob=bob", "ops=ops,carol")
	c.ok(ops, "ops", nil, "--local", "keys", "add", "carol", key)
	c.acceptedPush("ops binds itself to carol, then registers her key", ops)

	// The installer sees the http-backend and the binding.
	r := testrepo.Run(t, c.bare, "server", nil, "--json", "hooks", "install", "--server")
	rep, _ := r.JSON["pusher"].(map[string]any)
	if r.Code != 0 || rep["bound"] != true || !hasMechanism(rep, "http-backend", "REMOTE_USER") {
		t.Fatalf("hooks install --server: exit %d, pusher report %v\n%s", r.Code, rep, r.Stderr)
	}
}

func hasMechanism(rep map[string]any, server, v string) bool {
	ms, _ := rep["mechanisms"].([]any)
	for _, m := range ms {
		if m, _ := m.(map[string]any); m["server"] == server && m["var"] == v {
			return true
		}
	}
	return false
}

// Over git daemon, the pusher comes from the server's environment: the
// variable the policy names wins over REMOTE_USER; the pusher's own entries
// are accepted, another actor's refused; a daemon that names no pusher has
// every push refused (PUSHER-UNKNOWN).
func TestPushersDaemon(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	named := gitserver.Daemon(t, root, "TALLY_PUSHER=alice", "REMOTE_USER=bob")
	silent := gitserver.Daemon(t, root)
	c := &pusherCluster{netCluster: &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, bin: testrepo.Tally(t)},
		urls: map[string]string{"named": named + "/shared.git", "silent": silent + "/shared.git"}}
	c.url = c.urls["named"]
	dir := c.as("named").clone("alice")
	remote := []string{"--remote", "origin"}
	c.ok(dir, "alice", nil, append(remote, "init")...)
	c.ok(dir, "alice", nil, append(remote, "policy", "set", "--admins", "alice", "--pusher-var", "TALLY_PUSHER")...)
	c.ok(dir, "alice", nil, append(remote, "policy", "set-pushers", "alice=alice")...)
	c.ok(dir, "alice", nil, append(remote, "note", "alice's own")...)
	c.syncLedger(dir)
	c.ok(dir, "bob", nil, "--local", "note", "bob's")
	c.pushRefused(dir, "another actor's entry", "PUSHER-DENIED", "pusher alice (TALLY_PUSHER) may not push entries of actor bob")

	quiet := c.as("silent").clone("quiet")
	c.syncLedger(quiet)
	c.ok(quiet, "alice", nil, "--local", "note", "through a daemon that names nobody")
	c.pushRefused(quiet, "no pusher identity", "PUSHER-UNKNOWN", "TALLY_PUSHER, GL_USER")
}

// hooks install --server reports the pusher mechanisms it can see: an
// http-backend with pushing enabled, gitolite's and Gitea's marks in the
// environment and in existing hooks; and says so when it finds none.
func TestHooksInstallServerPushers(t *testing.T) {
	t.Parallel()
	bare := func(setup func(dir string)) string {
		dir := filepath.Join(t.TempDir(), "r.git")
		testrepo.Git(t, filepath.Dir(dir), "init", "-q", "--bare", dir)
		setup(dir)
		return dir
	}
	install := func(dir string, env []string, args ...string) testrepo.Result {
		t.Helper()
		r := testrepo.Run(t, dir, "server", env, append(args, "hooks", "install", "--server")...)
		if r.Code != 0 {
			t.Fatalf("hooks install --server: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		return r
	}
	report := func(r testrepo.Result) map[string]any {
		rep, _ := r.JSON["pusher"].(map[string]any)
		return rep
	}

	httpRepo := bare(func(dir string) { testrepo.Git(t, dir, "config", "http.receivepack", "true") })
	if rep := report(install(httpRepo, nil, "--json")); !hasMechanism(rep, "http-backend", "REMOTE_USER") || rep["bound"] != false {
		t.Fatalf("http-backend repository: %v", rep)
	}

	gitea := bare(func(dir string) {
		if err := os.MkdirAll(filepath.Join(dir, "hooks", "pre-receive.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/usr/bin/env bash\n\"/usr/local/bin/gitea\" hook --config=/etc/gitea/app.ini pre-receive\n"
		if err := os.WriteFile(filepath.Join(dir, "hooks", "pre-receive.d", "gitea"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	rep := report(install(gitea, []string{"GL_BINDIR=/usr/share/gitolite3"}, "--json"))
	if !hasMechanism(rep, "gitea", "GITEA_PUSHER_NAME") || !hasMechanism(rep, "gitolite", "GL_USER") || hasMechanism(rep, "http-backend", "REMOTE_USER") {
		t.Fatalf("gitea hooks and gitolite environment: %v", rep)
	}

	plain := bare(func(string) {})
	if b, _ := json.Marshal(report(install(plain, nil, "--json"))); !strings.Contains(string(b), `"mechanisms":[]`) {
		t.Fatalf("plain repository: %s", b)
	}
	if out := install(plain, nil).Stdout; !strings.Contains(out, "pusher identity: no mechanism found here") ||
		!strings.Contains(out, "the policy binds none") {
		t.Fatalf("plain repository, text:\n%s", out)
	}
}
