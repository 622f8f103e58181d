package core

// Resources is the back-pressure set: what an endpoint tells the PML of
// the resources its sends take — credits, send buffers or fragments, the
// peer's receive space — so that the PML sends a small message by
// rendezvous rather than into a stall, bounds a pipeline's fragments in
// flight, and stops offering a refused frame until it may pass. A
// transport implements it whole, with the answers its mechanism has:
// btl/ib from its credits and send completions, btl/sm from its
// fragments (it runs no credits: PreferRendezvous is false). Without it
// the PML sends eagerly whatever fits, bounds no pipeline, and retries a
// refused frame at every poll.
type Resources interface {
	// PreferRendezvous reports that an eager frame would wait for credits
	// now and the flow-control policy asks for rendezvous in that case
	// (seed 000 §4.2): the START waits in the backlog instead of the
	// data, and the handshake brings credits back. A transport without
	// credit flow control answers false.
	PreferRendezvous() bool
	// FragsInFlight counts the frames of the send path's own buffers
	// (fragments, send buffers) that this endpoint has sent and not yet
	// seen done with: sm's fragments its receiver has not consumed, ib's
	// sends its device has not completed and those waiting for the
	// connection. The count may lag behind the peer (a transport learns of
	// completions in Progress), never run ahead of what it has seen. The
	// PML bounds a pipeline's fragments in flight with it (MechRule.Depth).
	FragsInFlight() int
	// Replenished is a count that grows whenever the endpoint regains
	// something a refused send lacked (a fragment taken back, a credit
	// returned, a send completed, the connection up), and at any refusal
	// whose end the endpoint cannot watch; while it has not changed since a
	// refusal with ErrNoResources, the same send would be refused again.
	// The PML's pipeline pump retries a refused fragment only once it has
	// changed, instead of at every poll while the receiver copies.
	Replenished() uint64
}
