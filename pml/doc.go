// Package pml is gobtl's protocol engine, the PML of Open MPI's PML/BTL
// split: it turns sends and receives into frames on BTL modules and
// back, and never imports a transport.
//
// A message goes eagerly when it fits the eager limit of the subchannel
// the scheduler picks for it; otherwise by rendezvous (seed 004 §3–4):
// rdma_write (RNDV_START, RNDV_REPLY with the receiver's keys, RDMA write,
// FIN), rdma_read (RNDV_START with the sender's keys, the receiver reads,
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
// # The backlog
//
// A frame a module refuses with core.ErrNoResources (no credit, a full
// queue) waits in its subchannel's queue, in order, and the frames behind
// it queue too; the request stays open until its frame leaves. Every
// progress pass resends the head of each queue (queue.go): this is the
// backlog of seed 000 §4.2, kept here rather than in each BTL. Reads,
// puts and gets wait the same way, reads first for a token of the
// subchannel's bucket (the module's MaxReads, lowered by the job's
// max_reads). A pipeline fragment that was refused offers its subchannel
// nothing more until the endpoint reports that it has taken resources
// back.
//
// # Rendezvous mechanism
//
// The protocol (Options.Protocol) says how a large message moves; the
// module says whether RDMA suits this message at all. A module with a
// mechanism table (core.Attrs.Mech: btl/sm's) chooses RDMA or the copy
// pipeline, and the pipeline's fragment and depth, by size and by how many
// rendezvous sends to the peer are in flight; an exchange's messages
// (IsendExchange, where the receiver sends to the sender at once) follow
// the module's exchange table where it has one. Without a table the
// module's RDMAMin/RDMAMax window decides. Only EAGER and RNDV_START carry
// a PSN; REPLY, FIN and FRAG name their request by id and generation, so
// they need no order. The payload layouts are at the top of wire.go.
//
// # The fused paths
//
// When the channel to a peer is one subchannel whose endpoint can show
// and write eager frames in place (sm's fast box), a blocking Recv or a
// Wait on a receive from that peer looks at the peer's next frame alone,
// checks on four words that it is the in-order EAGER frame of the right
// context and tag, and copies its payload into the buffer — no request,
// no handler, no poll of other modules (a full progress pass every 64th
// round); an eager Send or Isend writes its frame straight into the box,
// and Isend returns a request done at once. While tag and count stay the
// same, such Isends share one done request per communicator, as ob1
// returns ompi_request_empty, and a Waitall over a window of Irecvs first
// in line for one peer takes its in-order frames into them. Whatever
// could decide differently — an unexpected message or an earlier receive
// that could match, an out-of-order PSN, another tag, context or type, a
// short buffer, a lost peer, the progress thread, work waiting for
// resources, a scheduler policy, virtual time — turns the path off for
// that call, which then goes the general way (fast.go). The counters
// pml.fused_recvs, fused_sends and fused_released say how often it ran.
//
// # Progress, waiting and the lock
//
// Progress is single-threaded by default: a blocking call polls every
// module, then retries the backlog and polls the scheduling policy. It
// waits with a back-off (Backoff: spin, then sched_yield, then sleeps
// doubling to a bound), so that oversubscribed ranks don't starve each
// other (gobtl.Init makes a rank whose node has more ranks than CPUs
// yield at once, unless its stack sets spin). A rank that owns its core
// (Backoff.OwnCore) never yields or sleeps while it keeps the core: it
// hands the Go runtime a turn every 100 µs of spin (so that its own
// goroutines run and sysmon sends no preemption signal) and climbs the
// ladder, for a second, only once it finds it was off its core for more
// than 200 µs. The yield is a raw system call (sleep_linux.go): through
// syscall.Syscall, every long yield let the runtime's monitor take the
// rank's P and start a thread. With rdma_read_async a progress goroutine
// sleeps on the modules' notifiers instead (async.go). The engine's lock
// is biased to the first goroutine that takes it — plain loads and stores
// for it, the mutex for everyone once a second goroutine has called in
// (lock.go) — so the eager path takes one uncontended lock and allocates
// nothing.
//
// # Failure
//
// A frame that fails decoding or a protocol check is counted, logged and
// fails its peer's connection; it never panics and is never delivered. A
// module's report of a lost peer fails the peer's whole virtual channel,
// since a frame lost on one subchannel could be a PSN the receiver would
// wait for forever, and every request involving the peer — receives from
// AnySource included, until Comm.AckFailed — completes with an error
// wrapping core.ErrPeerLost. A blocking call gives up otherwise only after
// Options.StallTimeout without progress (off by default).
package pml
