package core

import (
	"errors"
	"fmt"
)

// Sentinel errors that callers branch on with errors.Is. Transports and the
// PML wrap them with context ("ib: connect rank 3: %w").
var (
	// ErrPeerLost reports that a peer, or the connection to it, is gone.
	// Every request that involves the peer fails with it.
	ErrPeerLost = errors.New("peer lost")
	// ErrTruncated reports a receive buffer smaller than the message. The
	// receive completes with the bytes that fit; the sender is unaffected.
	ErrTruncated = errors.New("message truncated")
	// ErrNoResources reports a transient shortage (send slots, credits,
	// read tokens). The operation was not started; retry after Progress.
	ErrNoResources = errors.New("out of resources")
	// ErrUnreachable reports that a module cannot reach a rank at all.
	ErrUnreachable = errors.New("peer unreachable")
	// ErrBadFrame reports a frame that failed validation. The connection it
	// arrived on is failed; the frame never reaches a receive.
	ErrBadFrame = errors.New("bad frame")
	// ErrCanceled reports a request that was canceled before it matched.
	ErrCanceled = errors.New("request canceled")
	// ErrClosed reports use of a closed module, communicator or device.
	ErrClosed = errors.New("closed")
	// ErrNotSupported reports an operation the component does not offer.
	ErrNotSupported = errors.New("not supported")
	// ErrStalled reports that progress stopped for longer than a configured
	// bound, for example a sender blocked on a full mailbox with no flow
	// control (seed 003 §4).
	ErrStalled = errors.New("stalled")
	// ErrAborted reports a job this rank gave up on because another part
	// of the program failed (pml.Comm.Abort, gobtl.RunLocal).
	ErrAborted = errors.New("job aborted")
)

// FrameError describes why a frame failed validation. It matches ErrBadFrame
// under errors.Is.
type FrameError struct {
	Peer   int    // source rank as far as known, -1 if not
	Field  string // header field that failed: "version", "type", "length", ...
	Value  uint64 // the offending value
	Reason string // what was expected
}

func (e *FrameError) Error() string {
	peer := "unknown peer"
	if e.Peer >= 0 {
		peer = fmt.Sprintf("peer %d", e.Peer)
	}
	return fmt.Sprintf("bad frame from %s: field %s = %d: %s", peer, e.Field, e.Value, e.Reason)
}

// Unwrap lets errors.Is(err, ErrBadFrame) succeed.
func (e *FrameError) Unwrap() error { return ErrBadFrame }
