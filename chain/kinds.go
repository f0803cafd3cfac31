package chain

// Kind names what an entry does. The kinds are the vocabulary of
// docs/FORMAT.md §4; their rules live in lease.Apply, which refuses any kind
// not listed here. A kind matches ^[a-z][a-z0-9-]{0,31}$ (validKind), so a
// later format version can add kinds an older verifier reports as unknown
// (FORMAT.md §11a).
type Kind string

// The entry kinds.
const (
	KindGenesis Kind = "genesis" // entry 0, and only entry 0
	KindNote    Kind = "note"
	KindPlan    Kind = "plan"
	KindClaim   Kind = "claim"
	KindRenew   Kind = "renew"
	KindRelease Kind = "release"
	KindFail    Kind = "fail"
	KindRequeue Kind = "requeue"
	KindDone    Kind = "done"
	KindPolicy  Kind = "policy"
	KindKeys    Kind = "keys"
	KindAnchor  Kind = "anchor"
	KindLock    Kind = "lock"
	KindUnlock  Kind = "unlock"
	KindWait    Kind = "wait"
	KindBreak   Kind = "break"
)
