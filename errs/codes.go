package errs

// Code is a stable error code: part of the command-line and MCP API, listed
// with its exit class in docs/FORMAT.md §12. Every code is one of the
// constants below, each in classes; errs/codes_test.go fails if code
// elsewhere spells a code as a string literal, if a constant has no class or
// is missing from FORMAT.md, or if a constant is never used.
type Code string

// The codes, grouped by exit class.
const (
	// retryable: the same command may succeed later without changing anything
	Conflict          Code = "CONFLICT"
	LeaseHeld         Code = "LEASE-HELD"
	StealDenied       Code = "STEAL-DENIED"
	NoReadyCell       Code = "NO-READY-CELL"
	RefLocked         Code = "REF-LOCKED"
	Busy              Code = "BUSY"
	RemoteUnreachable Code = "REMOTE-UNREACHABLE"
	WaitTimeout       Code = "WAIT-TIMEOUT"
	HookTimeout       Code = "HOOK-TIMEOUT"

	// refused: the request breaks a rule or is malformed
	Usage               Code = "USAGE"
	NotARepo            Code = "NOT-A-REPO"
	PlanComplete        Code = "PLAN-COMPLETE"
	LeaseOwned          Code = "LEASE-OWNED"
	NotSupported        Code = "NOT-SUPPORTED"
	NotInitialized      Code = "NOT-INITIALIZED"
	AlreadyInitialized  Code = "ALREADY-INITIALIZED"
	LedgerOnRemote      Code = "LEDGER-ON-REMOTE"
	WaveExists          Code = "WAVE-EXISTS"
	WaveMissing         Code = "WAVE-MISSING"
	CellMissing         Code = "CELL-MISSING"
	DepMissing          Code = "DEP-MISSING"
	DepCycle            Code = "DEP-CYCLE"
	CellState           Code = "CELL-STATE"
	ActorMismatch       Code = "ACTOR-MISMATCH"
	EpochMismatch       Code = "EPOCH-MISMATCH"
	LeaseExpired        Code = "LEASE-EXPIRED"
	LeaseMaxHold        Code = "LEASE-MAX-HOLD"
	LeaseMissing        Code = "LEASE-MISSING"
	ReceiptScope        Code = "RECEIPT-SCOPE"
	ReceiptMissing      Code = "RECEIPT-MISSING"
	CommitMissing       Code = "COMMIT-MISSING"
	RemoteRejected      Code = "REMOTE-REJECTED"
	RemoteDenied        Code = "REMOTE-DENIED"
	KeyUnknown          Code = "KEY-UNKNOWN"
	KeyRequired         Code = "KEY-REQUIRED"
	Policy              Code = "POLICY"
	PathHeld            Code = "PATH-HELD"
	IOError             Code = "IO-ERROR"
	CommandFailed       Code = "COMMAND-FAILED"
	DeadHolderRemote    Code = "DEAD-HOLDER-REMOTE"
	DeadHolderUnchecked Code = "DEAD-HOLDER-UNCHECKED"
	PusherDenied        Code = "PUSHER-DENIED"
	PusherUnknown       Code = "PUSHER-UNKNOWN"
	LimitExceeded       Code = "LIMIT-EXCEEDED"
	AuditFailed         Code = "AUDIT-FAILED"
	HistoryShallow      Code = "HISTORY-SHALLOW"
	NotInstalled        Code = "NOT-INSTALLED"
	MergeConflict       Code = "MERGE-CONFLICT"
	WorktreeDirty       Code = "WORKTREE-DIRTY"
	WorktreeBase        Code = "WORKTREE-BASE"
	SequencerSigns      Code = "SEQUENCER-SIGNS"
	RequestReplayed     Code = "REQUEST-REPLAYED"
	SequencerAbsent     Code = "SEQUENCER-ABSENT"

	// integrity: the ledger or the local state cannot be trusted as it is
	Internal          Code = "INTERNAL"
	Corrupt           Code = "CORRUPT"
	HashMismatch      Code = "HASH-MISMATCH"
	LinkBroken        Code = "LINK-BROKEN"
	SeqGap            Code = "SEQ-GAP"
	Noncanonical      Code = "NONCANONICAL"
	TimeReversed      Code = "TIME-REVERSED"
	StateMismatch     Code = "STATE-MISMATCH"
	HistoryNonlinear  Code = "HISTORY-NONLINEAR"
	CommitMismatch    Code = "COMMIT-MISMATCH"
	RuleViolation     Code = "RULE-VIOLATION"
	ForkDetected      Code = "FORK-DETECTED"
	RollbackDetected  Code = "ROLLBACK-DETECTED"
	Unsigned          Code = "UNSIGNED"
	BadSignature      Code = "BAD-SIGNATURE"
	ReceiptInvalid    Code = "RECEIPT-INVALID"
	CheckpointInvalid Code = "CHECKPOINT-INVALID"
	ProofInvalid      Code = "PROOF-INVALID"
)

// classes maps every code to its exit class.
var classes = map[Code]Class{
	// retryable: the same command may succeed later without changing anything
	Conflict:          Retryable,
	LeaseHeld:         Retryable,
	StealDenied:       Retryable,
	NoReadyCell:       Retryable,
	RefLocked:         Retryable,
	Busy:              Retryable,
	RemoteUnreachable: Retryable,
	WaitTimeout:       Retryable,
	HookTimeout:       Retryable,

	// refused: the request breaks a rule or is malformed
	Usage:               Refused,
	NotARepo:            Refused,
	PlanComplete:        Refused,
	LeaseOwned:          Refused,
	NotSupported:        Refused,
	NotInitialized:      Refused,
	AlreadyInitialized:  Refused,
	LedgerOnRemote:      Refused,
	WaveExists:          Refused,
	WaveMissing:         Refused,
	CellMissing:         Refused,
	DepMissing:          Refused,
	DepCycle:            Refused,
	CellState:           Refused,
	ActorMismatch:       Refused,
	EpochMismatch:       Refused,
	LeaseExpired:        Refused,
	LeaseMaxHold:        Refused,
	LeaseMissing:        Refused,
	ReceiptScope:        Refused,
	ReceiptMissing:      Refused,
	CommitMissing:       Refused,
	RemoteRejected:      Refused,
	RemoteDenied:        Refused,
	KeyUnknown:          Refused,
	KeyRequired:         Refused,
	Policy:              Refused,
	PathHeld:            Refused,
	IOError:             Refused,
	CommandFailed:       Refused,
	DeadHolderRemote:    Refused,
	DeadHolderUnchecked: Refused,
	PusherDenied:        Refused,
	PusherUnknown:       Refused,
	LimitExceeded:       Refused,
	AuditFailed:         Refused,
	HistoryShallow:      Refused,
	NotInstalled:        Refused,
	MergeConflict:       Refused,
	WorktreeDirty:       Refused,
	WorktreeBase:        Refused,
	SequencerSigns:      Refused,
	RequestReplayed:     Refused,
	SequencerAbsent:     Refused,

	// integrity: the ledger or the local state cannot be trusted as it is
	Internal:          Integrity,
	Corrupt:           Integrity,
	HashMismatch:      Integrity,
	LinkBroken:        Integrity,
	SeqGap:            Integrity,
	Noncanonical:      Integrity,
	TimeReversed:      Integrity,
	StateMismatch:     Integrity,
	HistoryNonlinear:  Integrity,
	CommitMismatch:    Integrity,
	RuleViolation:     Integrity,
	ForkDetected:      Integrity,
	RollbackDetected:  Integrity,
	Unsigned:          Integrity,
	BadSignature:      Integrity,
	ReceiptInvalid:    Integrity,
	CheckpointInvalid: Integrity,
	ProofInvalid:      Integrity,
}
