// Package pml is gobtl's protocol engine, the PML of Open MPI's PML/BTL
// split: it turns sends and receives into frames on BTL modules and
// back, and never imports a transport.
//
// A message goes eagerly when it fits the eager limit of the subchannel
// the scheduler picks for it; otherwise by rendezvous (seed 004 §3–4):
// rdma_write (RNDZ_START, RNDZ_REPLY with the receiver's keys, RDMA write,
// FIN), rdma_read (RNDZ_START with the sender's keys, the receiver reads,
// FIN only after the read completes; outstanding reads per endpoint bounded
// by a token bucket whose overflow waits in a FIFO, §4.2), or
// rdma_read_async (§4.3: the START and the read completions are solicited,
// and a progress goroutine woken only by those events, and only while
// receives are pending, drains the modules with further interrupts
// suppressed). A module without put/get gets a send-based copy-in/copy-out
// pipeline, fragmenting at its max send size.
//
// Each peer is a virtual channel of one or more subchannels — any mix of
// modules, ports and connections (seed 001 §4.2). The communication
// scheduler multiplexes small and control frames over them and stripes
// RDMA data by weight (§4.1, §4.4); the completion filter reports a striped
// message once and feeds stripe delivery times back to the scheduling
// policy (§4.5, §5.3). Every EAGER and START frame carries the channel's
// packet sequence number; the receiver matches them strictly in sequence,
// parking early arrivals in an out-of-order queue (§5.2), which gives MPI's
// non-overtaking order across subchannels and across protocols.
//
// Matching is per context (Comm.Dup), with AnySource and AnyTag; messages
// that arrive before their receive wait on the unexpected list. A receive
// buffer shorter than the message completes with core.ErrTruncated and the
// bytes that fit; the sender is unaffected. A lost connection fails every
// request that involves the peer with core.ErrPeerLost.
//
// Progress is single-threaded by default: blocking calls poll every
// module, spinning, then yielding, then sleeping with a growing interval,
// so that oversubscribed ranks don't starve each other. The eager path
// allocates nothing and takes one uncontended lock.
package pml
