//go:build !linux

package gitstore

import (
	"errors"
	"os"
)

// Without Linux's abstract sockets there is no hand-over: every writer
// waits for the lock (FORMAT.md §9).

func handoverNameOf(*os.File) (string, error) { return "", errors.ErrUnsupported }

// HolderConn is a requester's connection to the writer-lock holder.
type HolderConn struct{}

// DialHolder reaches nobody here.
func DialHolder(string) (*HolderConn, error) { return nil, ErrNoHolder }

// Send sends one frame.
func (*HolderConn) Send([]byte) error { return ErrNoHolder }

// Receive waits for the next frame.
func (*HolderConn) Receive(int) ([]byte, error) { return nil, ErrNoHolder }

// Close ends the connection.
func (*HolderConn) Close() {}

// HandoverListener is the holder's socket (Listen).
type HandoverListener struct{}

// Listen never binds here.
func (*WriterLock) Listen() *HandoverListener { return nil }

// Take takes nothing.
func (*HandoverListener) Take(int) []*HandoverConn { return nil }

// Close does nothing.
func (*HandoverListener) Close() {}

// Send sends one frame to the requester.
func (*HandoverConn) Send([]byte) error { return ErrNoHolder }

// Close ends the connection.
func (*HandoverConn) Close() {}
