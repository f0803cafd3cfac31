package lease_test

import (
	"testing"

	"github.com/tally-dev/tally/lease"
)

// '*' matches any run of characters, '/' and nothing included, and a pattern
// must match the whole actor name.
func TestMatchActor(t *testing.T) {
	for _, c := range []struct {
		pattern, actor string
		want           bool
	}{
		{"alice", "alice", true},
		{"alice", "alice-2", false},
		{"alice", "xalice", false},
		{"*", "anyone at all", true},
		{"*", "", true},
		{"bot-*", "bot-", true},
		{"bot-*", "bot-ci/7", true},
		{"bot-*", "robot-ci", false},
		{"*@example.com", "a@example.com", true},
		{"*@example.com", "a@example.com.evil", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "a-b-b-c", true},
		{"a*b*c", "a-c-b", false},
		{"ab*ba", "aba", false}, // prefix and suffix may not overlap
		{"a**a", "aa", true},
	} {
		if got := lease.MatchActor(c.pattern, c.actor); got != c.want {
			t.Errorf("MatchActor(%q, %q) = %v, want %v", c.pattern, c.actor, got, c.want)
		}
	}
}

// The pushers binding replaces the whole map, may be cleared, and refuses
// malformed pushers, patterns and variable names; the admin rule covers it.
func TestPolicyPushers(t *testing.T) {
	w := newWorld(t)
	bind := map[string][]string{"ci": {"bot-*"}, "alice": {"alice-*", "alice"}}
	w.ok("policy", "admin", lease.PolicySet{Pushers: &bind})
	p, err := lease.ReadPolicy(w.kv)
	if err != nil {
		t.Fatal(err)
	}
	if !p.PushersBound() || !p.PusherMay("alice", "alice") || !p.PusherMay("alice", "alice-laptop") ||
		!p.PusherMay("ci", "bot-7") || p.PusherMay("ci", "alice") || p.PusherMay("mallory", "mallory") {
		t.Fatalf("binding %v", p.Pushers)
	}
	for _, bad := range []map[string][]string{{"": {"a"}}, {"ci": {}}, {"ci": {"bad<name>"}}} {
		w.refuse("USAGE", "policy", "admin", lease.PolicySet{Pushers: &bad})
	}
	for _, bad := range []string{"1ST", "A-B", "A B"} {
		w.refuse("USAGE", "policy", "admin", lease.PolicySet{PusherVar: &bad})
	}
	v := "TALLY_PUSHER"
	w.ok("policy", "admin", lease.PolicySet{PusherVar: &v})
	admins := []string{"admin"}
	w.ok("policy", "admin", lease.PolicySet{Admins: &admins})
	none := map[string][]string{}
	w.refuse("POLICY", "policy", "mallory", lease.PolicySet{Pushers: &none})
	w.ok("policy", "admin", lease.PolicySet{Pushers: &none})
	if p, err = lease.ReadPolicy(w.kv); err != nil || p.PushersBound() || p.PusherVar != v {
		t.Fatalf("after clearing: %+v, %v", p, err)
	}
}

// Signatures cannot be required while anyone may change the policy: with no
// admins, turning them on is refused, and so is removing the last admin while
// they are on.
func TestRequireSignaturesNeedsAdmins(t *testing.T) {
	w := newWorld(t)
	yes := true
	w.refuse("POLICY", "policy", "alice", lease.PolicySet{RequireSignatures: &yes})
	admins, none := []string{"alice"}, []string{}
	w.ok("policy", "alice", lease.PolicySet{RequireSignatures: &yes, Admins: &admins})
	w.refuse("POLICY", "policy", "alice", lease.PolicySet{Admins: &none})
}

// TestIsAuthor: an actor is the author whose email is its name, and any the
// policy's authors patterns give it; nobody else.
func TestIsAuthor(t *testing.T) {
	p := &lease.Policy{Authors: map[string][]string{"agent-1": {"agent-1@ci.*", "a1@example.com"}}}
	for _, c := range []struct {
		actor, email string
		want         bool
	}{
		{"agent-1", "agent-1", true},
		{"agent-1", "agent-1@ci.example.com", true},
		{"agent-1", "a1@example.com", true},
		{"agent-1", "agent-2@ci.example.com", false},
		{"agent-2", "agent-1@ci.example.com", false},
		{"bob@example.com", "bob@example.com", true},
		{"bob@example.com", "alice@example.com", false},
	} {
		if got := p.IsAuthor(c.actor, c.email); got != c.want {
			t.Errorf("IsAuthor(%q, %q) = %v, want %v", c.actor, c.email, got, c.want)
		}
	}
}
