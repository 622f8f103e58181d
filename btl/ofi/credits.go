package ofi

import "github.com/gobtl/gobtl/core"

// Credits: the user-level static scheme of seed 000 §4.2 on every
// receive class. A sender starts with the window the receiver published
// for the class (its buffers per peer, or its max_pending on a shared
// class) and spends one per frame; with none left the frame is refused
// with core.ErrNoResources and waits in the PML's backlog. The receiver
// reposts a buffer as soon as its frame is handled and owes the sender a
// credit for it; owed credits ride back in the header of every frame of
// the same class going the other way, and once the class's threshold is
// owed and no frame has carried them by the next Progress, an explicit
// credit message (a control message, one count per class) goes. Credit
// messages are optimistic: they spend no credit and are owed none, so
// two sides out of credits cannot deadlock. A frame sent with
// core.SendNoFlowControl carries the no-credit bit in its tag and is owed
// nothing either.
//
// The backlog bit (core.FlagBacklog) marks the frame that ends a stall
// and every frame the PML sends from its backlog behind it, so that a
// receiver sees each message that waited (seed 000 §4.3).

// credit is a sender's state for one class of one peer.
type credit struct {
	avail    int
	held     bool // a frame was refused and has not gone yet
	draining bool // a stall ended; frames from the backlog still come
}

// flag is the header flag of a frame going now: queued says it comes
// from the PML's backlog.
func (c *credit) flag(queued bool) core.Flag {
	if c.held || queued && c.draining {
		return core.FlagBacklog
	}
	return 0
}

// commit records that a frame went; it reports whether it carried the
// backlog bit.
func (c *credit) commit(queued bool) bool {
	switch {
	case c.held:
		c.held, c.draining = false, true
		return true
	case queued && c.draining:
		return true
	}
	c.draining = false
	return false
}
