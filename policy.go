package tally

import (
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// Policy returns the policy in force at the tip, and the state layouts the
// ledger recorded there (the receipts index's).
func (c *Client) Policy() (*lease.Policy, *lease.Layout, error) {
	s, err := c.head()
	if err != nil {
		return nil, nil, err
	}
	p, err := lease.ReadPolicy(s)
	if err != nil {
		return nil, nil, err
	}
	l, err := lease.ReadLayout(s)
	return p, l, err
}

// SetPolicy changes the fields set in p.
func (c *Client) SetPolicy(p lease.PolicySet) (*Appended, error) { return c.simple("policy", p) }

// Keys returns the keys registered for an actor.
func (c *Client) Keys(actor string) (*lease.ActorKeys, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	return lease.ReadKeys(s, actor)
}

// AddKey registers an SSH ed25519 public key for actor.
func (c *Client) AddKey(actor, key string) (*Appended, error) { return c.keyOp("add", actor, key) }

// RevokeKey revokes a key of actor.
func (c *Client) RevokeKey(actor, key string) (*Appended, error) {
	return c.keyOp("revoke", actor, key)
}

// RotateKey registers newKey and revokes oldKey in one atomic append, so the
// actor is never without a key.
func (c *Client) RotateKey(actor, oldKey, newKey string) ([]Appended, error) {
	bodies := []lease.KeysBody{{Op: "add", Actor: actor}, {Op: "revoke", Actor: actor}}
	var err error
	if bodies[0].Key, _, err = identity.NormalizeKey(newKey); err != nil {
		return nil, errs.New(errs.Usage, "new key: %v", err)
	}
	if bodies[1].Key, _, err = identity.NormalizeKey(oldKey); err != nil {
		return nil, errs.New(errs.Usage, "old key: %v", err)
	}
	aps, err := c.appendBatch([]ledger.BuildFunc{static("keys", bodies[0]), static("keys", bodies[1])})
	if err != nil {
		return nil, err
	}
	return []Appended{appendedOf(aps[0]), appendedOf(aps[1])}, nil
}

func (c *Client) keyOp(op, actor, key string) (*Appended, error) {
	k, _, err := identity.NormalizeKey(key)
	if err != nil {
		return nil, errs.New(errs.Usage, "%v", err)
	}
	return c.simple("keys", lease.KeysBody{Op: op, Actor: actor, Key: k})
}
