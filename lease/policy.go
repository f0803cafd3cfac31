package lease

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/refname"
)

// Enforcement modes of push policies.
const (
	Off     = "off"
	Warn    = "warn"
	Enforce = "enforce"
)

// Policy is the ledger's policy. It lives in the ledger (state key "policy"),
// so the writer, verify and the server hook all read the same rules at the
// same point of the chain.
type Policy struct {
	// RequireSignatures refuses entries whose commit is not signed with a key
	// registered for their actor.
	RequireSignatures bool `json:"require_signatures"`
	// SkewSeconds bounds how far ahead of the server clock pushed entry
	// timestamps may be.
	SkewSeconds int `json:"skew_seconds"`
	// Receipts: pushes to Protected branches whose new commits lack a valid
	// receipt are refused (enforce), reported (warn) or ignored (off).
	Receipts string `json:"receipts"`
	// PathLeases: pushes changing paths under another actor's live lease.
	PathLeases string `json:"path_leases"`
	// Protected are the full ref names the receipts policy covers.
	Protected []string `json:"protected"`
	// Roles maps role names to priorities (higher preempts lower).
	Roles map[string]int `json:"roles"`
	// ActorRoles maps actors to their role.
	ActorRoles map[string]string `json:"actor_roles"`
	// Admins may change the policy and anyone's keys; when empty, anyone may
	// change the policy and each actor manages only its own keys.
	Admins []string `json:"admins"`
	// Pushers binds the identities a git server authenticates (the pusher) to
	// the actors whose entries they may push (ActorPatterns). When non-empty,
	// the server hook refuses a push whose pusher is unknown, or which adds an
	// entry, or registers a key, for an actor its pusher may not use. Omitted
	// from the state when empty, so ledgers written before the field existed
	// replay to the same bytes.
	Pushers map[string][]string `json:"pushers,omitempty"`
	// PusherVar names one more environment variable the server hook reads
	// the pusher from, ahead of the ones it knows (hooks.PusherVars).
	PusherVar string `json:"pusher_var,omitempty"`
	// Authors maps an actor to the commit author emails (patterns, as
	// MatchActor reads them) that count as its own where the push hooks
	// compare a path hold's actor with a commit's author. An actor is always
	// the author whose email is its own name. Omitted when empty, like
	// Pushers.
	Authors map[string][]string `json:"authors,omitempty"`
	// EditLeases is what the edit guard and the pre-commit hook do with a
	// path nobody holds: allow it (Off), allow it with a warning (Warn), or
	// refuse it (Enforce: "edits need a lease"). Omitted while off ("" reads
	// as off), like Pushers.
	EditLeases string `json:"edit_leases,omitempty"`
	// SessionEnd is what the guard does with an actor's leases when its
	// agent's session ends: SessionExpire (leave them to their TTL) or
	// SessionRelease. Omitted while expire ("").
	SessionEnd string `json:"session_end,omitempty"`
}

// Values of Policy.SessionEnd.
const (
	SessionExpire  = "expire"
	SessionRelease = "release"
)

// editLeases is EditLeases with its default spelled out.
func (p *Policy) editLeases() string {
	if p.EditLeases == "" {
		return Off
	}
	return p.EditLeases
}

// ReleasesAtSessionEnd reports whether an agent's session end releases its
// leases rather than leaving them to expire.
func (p *Policy) ReleasesAtSessionEnd() bool { return p.SessionEnd == SessionRelease }

// IsAuthor reports whether a commit authored by email is actor's own work
// for the push rules: email is actor itself, or matches one of the
// patterns Authors gives actor.
func (p *Policy) IsAuthor(actor, email string) bool {
	if email == actor {
		return true
	}
	for _, pat := range p.Authors[actor] {
		if MatchActor(pat, email) {
			return true
		}
	}
	return false
}

// MatchActor reports whether pattern matches the whole of actor: '*' matches
// any run of characters (none included, '/' included), every other character
// itself.
func MatchActor(pattern, actor string) bool {
	lit, rest, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == actor
	}
	if !strings.HasPrefix(actor, lit) {
		return false
	}
	actor = actor[len(lit):]
	// Each '*' takes the shortest run after which the next literal matches:
	// if any way of matching exists, the one with the leftmost literals does.
	for {
		lit, rest, star = strings.Cut(rest, "*")
		if !star {
			return len(actor) >= len(lit) && strings.HasSuffix(actor, lit)
		}
		i := strings.Index(actor, lit)
		if i < 0 {
			return false
		}
		actor = actor[i+len(lit):]
	}
}

// PushersBound reports whether the policy binds pushers to actors.
func (p *Policy) PushersBound() bool { return len(p.Pushers) > 0 }

// PusherMay reports whether pusher may push entries of actor: whether one of
// the patterns bound to pusher matches it. A pusher not in the binding may
// use no actor.
func (p *Policy) PusherMay(pusher, actor string) bool {
	for _, pat := range p.Pushers[pusher] {
		if MatchActor(pat, actor) {
			return true
		}
	}
	return false
}

// validPusherVar: an environment variable name as POSIX shells spell one.
func validPusherVar(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// DefaultSkewSeconds is the skew tolerance when the policy does not set one.
const DefaultSkewSeconds = 120

const policyKey = "policy"

// ReadPolicy returns the policy in force (defaults when none was set).
func ReadPolicy(kv chain.KV) (*Policy, error) {
	p := &Policy{SkewSeconds: DefaultSkewSeconds, Receipts: Off, PathLeases: Off,
		Protected: []string{}, Roles: map[string]int{}, ActorRoles: map[string]string{}, Admins: []string{}}
	if _, err := newTxn(kv).load(policyKey, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Priority returns the priority of an actor's role (0 without a role).
func (p *Policy) Priority(actor string) int { return p.Roles[p.ActorRoles[actor]] }

func (p *Policy) isAdmin(actor string) bool {
	for _, a := range p.Admins {
		if a == actor {
			return true
		}
	}
	return false
}

// PolicyAfter returns the policy an entry put in force, or nil if the entry
// left the policy as it was.
func (r *Result) PolicyAfter() (*Policy, error) {
	if _, ok := r.Changes[policyKey]; !ok {
		return nil, nil
	}
	return ReadPolicy(changesKV(r.Changes))
}

// changesKV reads a Result's changes as a state (a nil value is a deletion).
type changesKV map[string][]byte

func (c changesKV) Get(key string) ([]byte, bool, error) {
	v := c[key]
	return v, v != nil, nil
}

// PolicySet is the body of a "policy" entry: the fields to change.
type PolicySet struct {
	RequireSignatures *bool              `json:"require_signatures,omitempty"`
	SkewSeconds       *int               `json:"skew_seconds,omitempty"`
	Receipts          *string            `json:"receipts,omitempty"`
	PathLeases        *string            `json:"path_leases,omitempty"`
	Protected         *[]string          `json:"protected,omitempty"`
	Roles             *map[string]int    `json:"roles,omitempty"`
	ActorRoles        *map[string]string `json:"actor_roles,omitempty"`
	Admins            *[]string          `json:"admins,omitempty"`
	// Pushers replaces the whole binding; an empty map unbinds all pushers.
	Pushers *map[string][]string `json:"pushers,omitempty"`
	// PusherVar sets the extra pusher variable; "" removes it.
	PusherVar *string `json:"pusher_var,omitempty"`
	// Authors replaces the whole actor-to-author map; an empty map clears it.
	Authors *map[string][]string `json:"authors,omitempty"`
	// ReceiptIndex switches the ledger to the chunked receipts index
	// (ReceiptIndexChunked, the only value; once). It is recorded in the
	// layout blob, not the policy blob (Layout says why).
	ReceiptIndex *string `json:"receipt_index,omitempty"`
	// EditLeases sets edit_leases: off, warn or enforce.
	EditLeases *string `json:"edit_leases,omitempty"`
	// SessionEnd sets session_end: expire or release.
	SessionEnd *string `json:"session_end,omitempty"`
}

func validMode(m string) bool { return m == Off || m == Warn || m == Enforce }

func (r *rule) policy() (string, error) {
	var b PolicySet
	if err := r.body(&b); err != nil {
		return "", err
	}
	p, err := ReadPolicy(r.t)
	if err != nil {
		return "", err
	}
	if len(p.Admins) > 0 && !p.isAdmin(r.e.Actor) {
		return "", errs.New(errs.Policy, "only the policy admins %v may change the policy", p.Admins)
	}
	var changed []string
	if b.RequireSignatures != nil {
		p.RequireSignatures = *b.RequireSignatures
		changed = append(changed, "require_signatures")
	}
	if b.SkewSeconds != nil {
		if *b.SkewSeconds < 0 || *b.SkewSeconds > 86400 {
			return "", errs.New(errs.Usage, "skew_seconds must be 0..86400")
		}
		p.SkewSeconds = *b.SkewSeconds
		changed = append(changed, "skew_seconds")
	}
	for _, m := range []struct {
		name string
		val  *string
		dst  *string
	}{{"receipts", b.Receipts, &p.Receipts}, {"path_leases", b.PathLeases, &p.PathLeases}} {
		if m.val == nil {
			continue
		}
		if !validMode(*m.val) {
			return "", errs.New(errs.Usage, "%s must be off, warn or enforce", m.name)
		}
		*m.dst = *m.val
		changed = append(changed, m.name)
	}
	if b.Protected != nil {
		for _, ref := range *b.Protected {
			if !refname.Valid(ref) {
				return "", errs.New(errs.Usage, "protected ref %q must be a full ref name", ref)
			}
		}
		p.Protected = sorted(*b.Protected)
		changed = append(changed, "protected")
	}
	if b.Roles != nil {
		for role, prio := range *b.Roles {
			if !SafeID(role) || prio < -1000 || prio > 1000 {
				return "", errs.New(errs.Usage, "role %q: name must be a SafeId and priority -1000..1000", role)
			}
		}
		p.Roles = *b.Roles
		changed = append(changed, "roles")
	}
	if b.ActorRoles != nil {
		for actor, role := range *b.ActorRoles {
			if err := chain.ValidActor(actor); err != nil {
				return "", errs.New(errs.Usage, "%v", err)
			}
			if _, ok := p.Roles[role]; !ok {
				return "", errs.New(errs.Usage, "actor %s: role %q is not defined", actor, role)
			}
		}
		p.ActorRoles = *b.ActorRoles
		changed = append(changed, "actor_roles")
	}
	if b.Admins != nil {
		for _, a := range *b.Admins {
			if err := chain.ValidActor(a); err != nil {
				return "", errs.New(errs.Usage, "%v", err)
			}
		}
		p.Admins = sorted(*b.Admins)
		changed = append(changed, "admins")
	}
	if b.Pushers != nil {
		if p.Pushers, err = patternMap("pusher", "actor", *b.Pushers); err != nil {
			return "", err
		}
		changed = append(changed, "pushers")
	}
	if b.PusherVar != nil {
		if !validPusherVar(*b.PusherVar) {
			return "", errs.New(errs.Usage, "pusher_var %q must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes) or empty", *b.PusherVar)
		}
		p.PusherVar = *b.PusherVar
		changed = append(changed, "pusher_var")
	}
	if b.Authors != nil {
		if p.Authors, err = patternMap("actor", "author", *b.Authors); err != nil {
			return "", err
		}
		changed = append(changed, "authors")
	}
	if b.EditLeases != nil {
		if !validMode(*b.EditLeases) {
			return "", errs.New(errs.Usage, "edit_leases must be off, warn or enforce")
		}
		p.EditLeases = *b.EditLeases
		if p.EditLeases == Off {
			p.EditLeases = "" // the default is left out of the blob
		}
		changed = append(changed, "edit_leases")
	}
	if b.SessionEnd != nil {
		switch *b.SessionEnd {
		case SessionExpire:
			p.SessionEnd = ""
		case SessionRelease:
			p.SessionEnd = SessionRelease
		default:
			return "", errs.New(errs.Usage, "session_end must be expire or release")
		}
		changed = append(changed, "session_end")
	}
	// Without admins anyone may change the policy, so required signatures
	// would protect nothing: any actor with a key could turn them off.
	if p.RequireSignatures && len(p.Admins) == 0 {
		return "", errs.New(errs.Policy, "require_signatures needs admins: without them any actor may turn signatures off again")
	}
	if len(changed) > 0 {
		if err := r.t.put(policyKey, p); err != nil {
			return "", err
		}
	}
	if b.ReceiptIndex != nil {
		if err := r.t.switchReceiptIndex(*b.ReceiptIndex); err != nil {
			return "", err
		}
		changed = append(changed, "receipt_index")
	}
	if len(changed) == 0 {
		return "", errs.New(errs.Usage, "policy entry changes nothing")
	}
	return "policy: set " + strings.Join(changed, ", "), nil
}

// patternMap validates a name -> patterns map of the policy (pushers to
// actor patterns, actors to author patterns): names and patterns are valid
// actor names, each name has at least one pattern; patterns are stored
// sorted. An empty map gives nil (the field is then omitted).
func patternMap(name, of string, m map[string][]string) (map[string][]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string][]string, len(m))
	for k, pats := range m {
		if err := chain.ValidActor(k); err != nil {
			return nil, errs.New(errs.Usage, "%s: %v", name, err)
		}
		if len(pats) == 0 {
			return nil, errs.New(errs.Usage, "%s %s: no %s patterns (leave it out instead)", name, k, of)
		}
		for _, pat := range pats {
			if err := chain.ValidActor(pat); err != nil {
				return nil, errs.New(errs.Usage, "%s %s: %s pattern: %v", name, k, of, err)
			}
		}
		out[k] = sorted(slices.Clone(pats))
	}
	return out, nil
}

// ActorKey is one key registered for an actor.
type ActorKey struct {
	Key         string  `json:"key"`
	Fingerprint string  `json:"fingerprint"`
	Added       uint64  `json:"added"`
	Revoked     *uint64 `json:"revoked"`
}

// ActorKeys is the key history of an actor.
type ActorKeys struct {
	Actor string     `json:"actor"`
	Keys  []ActorKey `json:"keys"`
}

// Active returns the actor's keys that are not revoked.
func (k *ActorKeys) Active() []string {
	var out []string
	for _, key := range k.Keys {
		if key.Revoked == nil {
			out = append(out, key.Key)
		}
	}
	return out
}

// keysKey shards actors by a hash of their name (actor names may hold '/').
func keysKey(actor string) string {
	sum := blake3.Sum256([]byte(actor))
	h := hex.EncodeToString(sum[:16])
	return "keys/" + h[:2] + "/" + h
}

// ReadKeys returns the keys registered for an actor.
func ReadKeys(kv chain.KV, actor string) (*ActorKeys, error) {
	k := &ActorKeys{Actor: actor, Keys: []ActorKey{}}
	if _, err := newTxn(kv).load(keysKey(actor), k); err != nil {
		return nil, err
	}
	return k, nil
}

// KeysBody is the body of a "keys" entry.
type KeysBody struct {
	Op    string `json:"op"` // "add" or "revoke"
	Actor string `json:"actor"`
	Key   string `json:"key"`
}

func (r *rule) keys() (string, error) {
	var b KeysBody
	if err := r.body(&b); err != nil {
		return "", err
	}
	if err := chain.ValidActor(b.Actor); err != nil {
		return "", errs.New(errs.Usage, "%v", err)
	}
	key, fp, err := identity.NormalizeKey(b.Key)
	if err != nil || key != b.Key {
		return "", errs.New(errs.Usage, "key must be a normalized ssh-ed25519 public key line")
	}
	p, err := ReadPolicy(r.t)
	if err != nil {
		return "", err
	}
	if r.e.Actor != b.Actor && !p.isAdmin(r.e.Actor) {
		return "", errs.New(errs.Policy, "%s may not manage the keys of %s (only its own, or an admin)", r.e.Actor, b.Actor)
	}
	ks, err := ReadKeys(r.t, b.Actor)
	if err != nil {
		return "", err
	}
	i := len(ks.Keys) // the active entry for key, if any
	for j := range ks.Keys {
		if ks.Keys[j].Key == key && ks.Keys[j].Revoked == nil {
			i = j
		}
	}
	switch b.Op {
	case "add":
		if i < len(ks.Keys) {
			return "", errs.New(errs.Usage, "key %s is already registered for %s", fp, b.Actor)
		}
		ks.Keys = append(ks.Keys, ActorKey{Key: key, Fingerprint: fp, Added: r.e.Seq})
	case "revoke":
		if i == len(ks.Keys) {
			return "", errs.New(errs.KeyUnknown, "key %s is not an active key of %s", fp, b.Actor)
		}
		seq := r.e.Seq
		ks.Keys[i].Revoked = &seq
	default:
		return "", errs.New(errs.Usage, "keys op must be add or revoke")
	}
	if err := r.t.put(keysKey(b.Actor), ks); err != nil {
		return "", err
	}
	return fmt.Sprintf("keys: %s %s for %s", b.Op, fp, b.Actor), nil
}
