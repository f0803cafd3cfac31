package lease

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/identity"
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
		return "", errs.New("POLICY", "only the policy admins %v may change the policy", p.Admins)
	}
	var changed []string
	if b.RequireSignatures != nil {
		p.RequireSignatures = *b.RequireSignatures
		changed = append(changed, "require_signatures")
	}
	if b.SkewSeconds != nil {
		if *b.SkewSeconds < 0 || *b.SkewSeconds > 86400 {
			return "", errs.New("USAGE", "skew_seconds must be 0..86400")
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
			return "", errs.New("USAGE", "%s must be off, warn or enforce", m.name)
		}
		*m.dst = *m.val
		changed = append(changed, m.name)
	}
	if b.Protected != nil {
		for _, ref := range *b.Protected {
			if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \t\n~^:?*[\\") {
				return "", errs.New("USAGE", "protected ref %q must be a full ref name", ref)
			}
		}
		p.Protected = sorted(*b.Protected)
		changed = append(changed, "protected")
	}
	if b.Roles != nil {
		for role, prio := range *b.Roles {
			if !SafeID(role) || prio < -1000 || prio > 1000 {
				return "", errs.New("USAGE", "role %q: name must be a SafeId and priority -1000..1000", role)
			}
		}
		p.Roles = *b.Roles
		changed = append(changed, "roles")
	}
	if b.ActorRoles != nil {
		for actor, role := range *b.ActorRoles {
			if err := chain.ValidActor(actor); err != nil {
				return "", errs.New("USAGE", "%v", err)
			}
			if _, ok := p.Roles[role]; !ok {
				return "", errs.New("USAGE", "actor %s: role %q is not defined", actor, role)
			}
		}
		p.ActorRoles = *b.ActorRoles
		changed = append(changed, "actor_roles")
	}
	if b.Admins != nil {
		for _, a := range *b.Admins {
			if err := chain.ValidActor(a); err != nil {
				return "", errs.New("USAGE", "%v", err)
			}
		}
		p.Admins = sorted(*b.Admins)
		changed = append(changed, "admins")
	}
	if len(changed) == 0 {
		return "", errs.New("USAGE", "policy entry changes nothing")
	}
	if err := r.t.put(policyKey, p); err != nil {
		return "", err
	}
	return "policy: set " + strings.Join(changed, ", "), nil
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
		return "", errs.New("USAGE", "%v", err)
	}
	key, fp, err := identity.NormalizeKey(b.Key)
	if err != nil || key != b.Key {
		return "", errs.New("USAGE", "key must be a normalized ssh-ed25519 public key line")
	}
	p, err := ReadPolicy(r.t)
	if err != nil {
		return "", err
	}
	if r.e.Actor != b.Actor && !p.isAdmin(r.e.Actor) {
		return "", errs.New("POLICY", "%s may not manage the keys of %s (only its own, or an admin)", r.e.Actor, b.Actor)
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
			return "", errs.New("USAGE", "key %s is already registered for %s", fp, b.Actor)
		}
		ks.Keys = append(ks.Keys, ActorKey{Key: key, Fingerprint: fp, Added: r.e.Seq})
	case "revoke":
		if i == len(ks.Keys) {
			return "", errs.New("KEY-UNKNOWN", "key %s is not an active key of %s", fp, b.Actor)
		}
		seq := r.e.Seq
		ks.Keys[i].Revoked = &seq
	default:
		return "", errs.New("USAGE", "keys op must be add or revoke")
	}
	if err := r.t.put(keysKey(b.Actor), ks); err != nil {
		return "", err
	}
	return fmt.Sprintf("keys: %s %s for %s", b.Op, fp, b.Actor), nil
}
