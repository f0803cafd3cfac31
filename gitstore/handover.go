package gitstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The hand-over (FORMAT.md §9, "Group commit: handing an append to the
// lock's holder"). A writer that finds the writer lock held connects to a
// Unix socket its holder listens on, in Linux's abstract namespace (no file
// is created: creating files was half an append's CPU under contention),
// named from the lock file's device and inode, so that every worktree of a
// clone shares it and no two clones meet. It sends one frame, its intent;
// the holder answers with at most two frames: "taken", sent before anything
// of the intent can land, then the outcome, sent once it is durable. The
// frames are opaque here: the ledger gives them their meaning. Each side
// checks the other's uid (SO_PEERCRED) and refuses a peer of another user:
// abstract names carry no permissions, so anyone can bind or connect.

// A frame is a 4-byte big-endian length, then that many bytes.
const frameHeader = 4

// Bounds of the hand-over. MaxIntent is the largest intent a holder reads
// (a writer with a larger one waits for the lock instead); MaxAnswer the
// largest answer a requester reads; intentWait how long a holder waits for
// an accepted connection's intent to arrive whole (a requester writes it
// right after connecting; one still short after that is not taken); and
// answerTimeout how long a holder may block writing to a requester that
// does not read.
const (
	MaxIntent     = 1 << 20
	MaxAnswer     = 64 << 20
	intentWait    = 20 * time.Millisecond
	answerTimeout = time.Second
	listenBacklog = 128
)

// ErrNoHolder is the outcome of a hand-over that reached nobody who takes
// intents: no socket is bound (the holder is an older tally, or one that
// does not serve), or a process of another user holds the name. The writer
// then waits for the lock.
var ErrNoHolder = errors.New("no writer-lock holder takes intents")

// errForeignPeer is a peer of another user.
var errForeignPeer = errors.New("the peer runs as another user")

// HandoverName is the abstract socket name of the writer lock whose file
// has device dev and inode ino: a leading NUL, then
// "tally/writer.lock/v1/<dev>/<ino>" in lowercase hex. Go spells the NUL
// as "@" in a socket address.
func HandoverName(dev, ino uint64) string {
	return fmt.Sprintf("@tally/writer.lock/v1/%x/%x", dev, ino)
}

// frame is payload with its header.
func frame(payload []byte) []byte {
	b := make([]byte, frameHeader+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[frameHeader:], payload)
	return b
}

// HandoverConn is one requester's connection, on the holder's side, with
// the intent it sent. A holder sends it at most two frames (Send) and
// closes it (Close); closing it before "taken" tells the requester that
// its intent was not taken.
type HandoverConn struct {
	fd     int
	Intent []byte
}
