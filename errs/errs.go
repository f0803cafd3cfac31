// Package errs defines tally's error values: a stable code, a human message and
// structured details. The code determines the exit class, which is part of the
// command-line API:
//
//	0 ok, 1 retryable (contention, held lease, transient remote),
//	2 refused (usage, rule violation), 3 integrity failure (verify failed, corrupt state).
//
// Any error that is not an *Error is reported as INTERNAL with class 3: tally fails
// closed rather than guessing that an unexplained failure is harmless.
package errs

import (
	"errors"
	"fmt"
	"syscall"
)

// Class is an exit class.
type Class int

// Exit classes.
const (
	OK        Class = 0
	Retryable Class = 1
	Refused   Class = 2
	Integrity Class = 3
)

// Error is a tally error. Details are extra machine-readable fields reported
// beside code and message (for example the holder of a lease).
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	Err     error // the cause, if any
}

// New returns an error with the given code and a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with the given code whose cause is err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &Error{Code: code, Message: msg, Err: err}
}

// With returns a copy of e with one more detail, so details chain onto New
// and no caller changes an error another holds (a package-level error, or
// one a callee returned to several).
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		c.Details[k] = v
	}
	c.Details[key] = value
	return &c
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Class is the exit class of e's code.
func (e *Error) Class() Class { return ClassOfCode(e.Code) }

// Retryable reports whether the same request may succeed later unchanged.
func (e *Error) Retryable() bool { return e.Class() == Retryable }

// ClassOfCode returns the class of a code; unknown codes are integrity failures.
func ClassOfCode(code Code) Class {
	if c, ok := classes[code]; ok {
		return c
	}
	return Integrity
}

// Known reports whether code is one tally defines.
func Known(code Code) bool { _, ok := classes[code]; return ok }

// ioErrnos are the system errors that say the machine could not store or
// read data (full disk, quota, read-only or failing device): nothing about
// the ledger is wrong, and retrying unchanged will not help until someone
// fixes the machine, so they are IO-ERROR (refused), not INTERNAL.
var ioErrnos = map[syscall.Errno]string{
	syscall.ENOSPC: "ENOSPC", syscall.EDQUOT: "EDQUOT", syscall.EROFS: "EROFS", syscall.EIO: "EIO",
}

// From converts any error into an *Error: a system I/O failure (ioErrnos)
// that is not already coded otherwise as IO-ERROR with the errno as detail,
// another *Error as it is, anything else as INTERNAL.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	coded := errors.As(err, &e)
	var errno syscall.Errno
	if (!coded || e.Code == Internal) && errors.As(err, &errno) && ioErrnos[errno] != "" {
		return (&Error{Code: IOError, Message: err.Error(), Err: err}).With("errno", ioErrnos[errno])
	}
	if coded {
		return e
	}
	return &Error{Code: Internal, Message: err.Error(), Err: err}
}

// CodeOf returns the code of err, or "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	return From(err).Code
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool { return err != nil && From(err).Code == code }
