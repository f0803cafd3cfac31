package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// PusherVars are the environment variables through which git servers tell
// their hooks who authenticated a push, in the order the server hook reads
// them (after the policy's pusher_var): gitolite, GitLab, Gitea and Forgejo,
// Soft Serve, and last REMOTE_USER, which any authenticating web server in
// front of git http-backend sets (the hosting software's own variable is the
// more specific statement, so it wins where both are set).
var PusherVars = []string{"GL_USER", "GL_USERNAME", "GITEA_PUSHER_NAME", "SOFT_SERVE_USERNAME", "REMOTE_USER"}

// Env looks up a variable of the hook's environment, as os.LookupEnv does.
type Env func(name string) (string, bool)

// Pusher is who pushed, as the server said it, and the variable that said so.
type Pusher struct {
	Name, Var string
}

// IdentifyPusher returns the pusher named by the first variable, of extra
// (the policy's pusher_var; "" for none) then PusherVars, that env holds with
// a non-empty value. ok is false when none does (or env is nil). The values
// are only as trustworthy as the process that set them: on a server, the
// server; on a file:// or local push, the pusher itself.
func IdentifyPusher(env Env, extra string) (p Pusher, ok bool) {
	if env == nil {
		return Pusher{}, false
	}
	for _, v := range pusherVars(extra) {
		if name, _ := env(v); name != "" {
			return Pusher{Name: name, Var: v}, true
		}
	}
	return Pusher{}, false
}

// pusherVars are the variables read for the pusher, in order.
func pusherVars(extra string) []string {
	if extra == "" {
		return PusherVars
	}
	return append([]string{extra}, PusherVars...)
}

// pusherCheck returns the per-entry check of the pusher binding for a push
// onto a ledger whose policy is p. Each entry is judged by the binding in
// force just before it: the policy before the push for the first entry, then
// as each policy entry of the push leaves it. So a policy entry that rebinds
// pushers must itself pass the old binding, and only the entries after it
// are judged by the new one. The pusher is read once, with the pusher_var of
// the policy before the push (a new pusher_var counts from the next push).
// While pushers are bound, every entry needs a pusher (PUSHER-UNKNOWN), an
// actor that pusher may use, and for a key registration (keys add) a key
// owner that pusher may use (PUSHER-DENIED).
func (c *Checker) pusherCheck(p *lease.Policy) func(*ledger.Applied) error {
	pusher, known := IdentifyPusher(c.Pusher, p.PusherVar)
	bound := p
	return func(a *ledger.Applied) error {
		if err := checkPusher(bound, pusher, known, a); err != nil {
			return err
		}
		next, err := a.Result.PolicyAfter()
		if err != nil {
			return err
		}
		if next != nil {
			bound = next
		}
		return nil
	}
}

// checkPusher judges one applied entry by the binding p in force before it
// (nothing to judge while p binds no pushers).
func checkPusher(p *lease.Policy, pusher Pusher, known bool, a *ledger.Applied) error {
	if !p.PushersBound() {
		return nil
	}
	e := a.Entry
	if !known {
		return errs.New(errs.PusherUnknown, "entry %d by %s: pushers are bound by the policy, but the server named no pusher (none of %s is set)",
			e.Seq, e.Actor, strings.Join(pusherVars(p.PusherVar), ", ")).With("seq", e.Seq).With("actor", e.Actor)
	}
	if !p.PusherMay(pusher.Name, e.Actor) {
		return errs.New(errs.PusherDenied, "entry %d: pusher %s (%s) may not push entries of actor %s (bound to %v)",
			e.Seq, pusher.Name, pusher.Var, e.Actor, p.Pushers[pusher.Name]).
			With("seq", e.Seq).With("pusher", pusher.Name).With("actor", e.Actor)
	}
	if e.Kind != chain.KindKeys {
		return nil
	}
	var k lease.KeysBody
	if err := json.Unmarshal(e.Body, &k); err != nil {
		return errs.Wrap(errs.Corrupt, err, "entry %d: keys body", e.Seq)
	}
	// Revoking is left to the lease rules (the owner or an admin): a
	// registration is what claims an actor name.
	if k.Op == "add" && !p.PusherMay(pusher.Name, k.Actor) {
		return errs.New(errs.PusherDenied, "entry %d: pusher %s (%s) may not register keys for actor %s (bound to %v)",
			e.Seq, pusher.Name, pusher.Var, k.Actor, p.Pushers[pusher.Name]).
			With("seq", e.Seq).With("pusher", pusher.Name).With("actor", k.Actor)
	}
	return nil
}

// PusherMechanism is a way a server may tell its hooks who pushed, as
// DetectPushers found evidence of it.
type PusherMechanism struct {
	Server   string `json:"server"` // gitolite, gitlab, gitea, soft-serve, http-backend
	Var      string `json:"var"`    // the variable it sets
	Evidence string `json:"evidence"`
}

// pusherFamilies: variables (exact, or a prefix ending in '_') that mark a
// server's hook environment, and the pusher variable that server sets.
var pusherFamilies = []struct{ server, pusherVar, marker string }{
	{"gitolite", "GL_USER", "GL_BINDIR"},
	{"gitolite", "GL_USER", "GL_ADMIN_BASE"},
	{"gitlab", "GL_USERNAME", "GL_ID"},
	{"gitlab", "GL_USERNAME", "GL_REPOSITORY"},
	{"gitea", "GITEA_PUSHER_NAME", "GITEA_"},
	{"soft-serve", "SOFT_SERVE_USERNAME", "SOFT_SERVE_"},
	{"http-backend", "REMOTE_USER", "REMOTE_USER"},
}

// hookSignatures: text in a repository's hooks that names the server that
// wrote them.
var hookSignatures = []struct{ server, pusherVar, text string }{
	{"gitolite", "GL_USER", "gitolite"},
	{"gitea", "GITEA_PUSHER_NAME", "gitea"},
	{"soft-serve", "SOFT_SERVE_USERNAME", "soft serve"},
	{"soft-serve", "SOFT_SERVE_USERNAME", "soft-serve"},
}

// DetectPushers lists the evidence, visible from where the server hook is
// being installed, that the server names the pusher to its hooks: environ
// (the installer's environment: variables of a server's hook environment),
// ~/.gitolite.rc under home, the repository's existing hooks (before tally's
// shim replaces pre-receive), and http.receivepack (pushes over git
// http-backend, which carry REMOTE_USER only if the web server in front
// authenticates them). It is a hint for whoever installs the hook: none of it
// proves that the server sets the variable for every push, and nothing is
// enforced until the policy binds pushers.
func DetectPushers(repo *gitstore.Repo, environ []string, home string) []PusherMechanism {
	var out []PusherMechanism
	add := func(server, v, evidence string) {
		for i := range out {
			if out[i].Server == server {
				out[i].Evidence += "; " + evidence
				return
			}
		}
		out = append(out, PusherMechanism{Server: server, Var: v, Evidence: evidence})
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, f := range pusherFamilies {
			if name == f.marker || strings.HasSuffix(f.marker, "_") && strings.HasPrefix(name, f.marker) {
				add(f.server, f.pusherVar, "$"+name+" is set here")
				break
			}
		}
	}
	if home != "" {
		if _, err := os.Stat(filepath.Join(home, ".gitolite.rc")); err == nil {
			add("gitolite", "GL_USER", "~/.gitolite.rc exists")
		}
	}
	dir := Dir(repo)
	files := []string{"pre-receive", "pre-receive" + origSuffix, "update"}
	if more, err := os.ReadDir(filepath.Join(dir, "pre-receive.d")); err == nil {
		for _, f := range more {
			files = append(files, filepath.Join("pre-receive.d", f.Name()))
		}
	}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		text := strings.ToLower(string(b))
		for _, s := range hookSignatures {
			if strings.Contains(text, s.text) {
				add(s.server, s.pusherVar, "hooks/"+name+" mentions "+s.text)
			}
		}
	}
	if v, ok := repo.ConfigValue("http.receivepack"); ok && slices.Contains([]string{"true", "yes", "on", "1"}, strings.ToLower(v)) { // git's spellings of true
		add("http-backend", "REMOTE_USER", "http.receivepack is true (REMOTE_USER is set only if the web server authenticates pushes)")
	}
	return out
}
