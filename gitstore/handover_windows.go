//go:build windows

package gitstore

// Windows has no hand-over: no Unix socket file there can be trusted to be
// bound only by the lock's holder and reached only by its user, and the
// hand-over is only a speedup. A requester finds no holder (ErrNoHolder)
// and waits for the lock; a holder never listens (Listen is nil), so the
// connection types below are never made.

// HolderConn is a requester's connection to the writer-lock holder.
type HolderConn struct{}

// DialHolder finds no holder here.
func DialHolder(string) (*HolderConn, error) { return nil, ErrNoHolder }

// Send sends nothing: no HolderConn exists here.
func (*HolderConn) Send([]byte) error { return ErrNoHolder }

// Receive receives nothing: no HolderConn exists here.
func (*HolderConn) Receive(int) ([]byte, error) { return nil, ErrNoHolder }

// Close does nothing.
func (*HolderConn) Close() {}

// HandoverListener is the holder's socket: none here.
type HandoverListener struct{}

// Listen does not listen here (nil).
func (*WriterLock) Listen(string) *HandoverListener { return nil }

// Take takes nothing.
func (*HandoverListener) Take(int) []*HandoverConn { return nil }

// Close does nothing.
func (*HandoverListener) Close() {}

// HandoverConn is one requester's connection on the holder's side: none
// here.
type HandoverConn struct{ Intent []byte }

// Send sends nothing.
func (*HandoverConn) Send([]byte) error { return ErrNoHolder }

// Close does nothing.
func (*HandoverConn) Close() {}
