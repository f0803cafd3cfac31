package gitstore

import (
	"encoding/binary"
	"errors"
	"time"
)

// The hand-over (FORMAT.md §9, "Group commit: handing an append to the
// lock's holder"). A writer that finds the writer lock held connects to a
// Unix socket its holder listens on: a socket file beside the lock
// (LocalPaths.WriterSocket), which only a user who can write that
// directory can bind, only while holding the lock, and which only its
// owner can connect through (mode 0600); every worktree of a clone meets
// there, and no two clones or namespaces do. The requester sends one frame,
// its intent; the holder answers with at most two frames: "taken", sent
// before anything of the intent can land, then the outcome, sent once it is
// durable. The frames are opaque here: the ledger gives them their meaning.
// Each side also checks the other's uid where the system tells it
// (handover_peer_*.go), and neither ever waits on the other unbounded
// before "taken": a requester connects without waiting (DialHolder), and a
// holder accepts a bounded number of connections for a bounded time (Take).
// On Windows there is no hand-over (handover_windows.go): every writer
// waits for the lock.

// A frame is a 4-byte big-endian length, then that many bytes.
const frameHeader = 4

// Bounds of the hand-over. MaxIntent is the largest intent a holder reads
// (a writer with a larger one waits for the lock instead); MaxAnswer the
// largest answer a requester reads; intentWait how long a holder accepts
// connections, and then waits for an accepted connection's intent to
// arrive whole (a requester writes it right after connecting; one still
// short after that is not taken); answerTimeout how long either side may
// block writing to a peer that does not read; dialWait how long a
// requester waits for a connection the system does not complete at once.
const (
	MaxIntent     = 1 << 20
	MaxAnswer     = 64 << 20
	intentWait    = 20 * time.Millisecond
	answerTimeout = time.Second
	dialWait      = 200 * time.Millisecond
	listenBacklog = 128
)

// ErrNoHolder is the outcome of a hand-over that reached nobody who takes
// intents: no socket is bound (the holder is an older tally, or one that
// does not serve, or this system has no hand-over), the holder's backlog is
// full, or the socket is another user's. The writer then waits for the
// lock.
var ErrNoHolder = errors.New("no writer-lock holder takes intents")

// errForeignPeer is a peer of another user.
var errForeignPeer = errors.New("the peer runs as another user")

// errNoPeerCredentials is peerUID's on a system that does not tell a
// socket peer's uid.
var errNoPeerCredentials = errors.New("this system does not tell a socket peer's uid")

// frame is payload with its header.
func frame(payload []byte) []byte {
	b := make([]byte, frameHeader+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[frameHeader:], payload)
	return b
}
