// Package ofi is the BTL over libfabric (OFI): one transport for
// InfiniBand and RoCE (verbs), AWS EFA (efa), Slingshot (cxi), Omni-Path
// (psm3, opx) and, in user space on any host, tcp (under ofi_rxm),
// sockets and shm — the last three are what its tests run on, with net,
// libfabric 1.17's reliable-datagram endpoint native to TCP (1.18 and
// later call it tcp and keep tcp under ofi_rxm beside it).
//
// It is built with the ofi build tag (and cgo): `make` installs
// libfabric-dev (make ofi-dev) and builds with GOTAGS=pmix,ofi. Without
// the tag the component still registers, and opening it fails with
// ErrNotBuilt, which says how to rebuild. The cgo layer is package
// fabric; everything about frames, credits, sessions and peers is here.
//
// # Modules and addresses
//
// One module per domain (a NIC): the block's domain, or each of
// if_include's in order (rails), or one the provider offers — loopback
// when the job is on one node, the first other domain when it spans
// nodes. A module is one reliable-datagram endpoint (FI_EP_RDM) with one
// address vector (a table) and one completion queue. At open it publishes
// its address (fi_getname) through the bootstrap, with its receive
// classes, credits and process identity; a peer's address goes into the
// address vector (fi_av_insert) when the PML first asks for its endpoint.
// Each module is one subchannel of every peer's virtual channel, so the
// PML stripes and schedules ofi rails as it does ib ports (seed 001 §4).
//
// On the providers that move bytes over TCP sockets (tcp, net, sockets),
// a module leaves its sockets to peers on this host unpaced (pacing.go):
// libfabric sets no socket option, so it finds them among the process's
// descriptors once the peer's session is up and sets a congestion
// control that does not pace, as softrc does for its own links; on a
// host whose default is BBR, loopback pacing doubled the time of a 1 MiB
// message.
//
// # The contract in libfabric's terms
//
//   - open: fi_getinfo (messages, tagged and RMA; FI_DELIVERY_COMPLETE, else
//     FI_ORDER_SAW), fi_fabric, fi_domain, fi_endpoint with one AV
//     (FI_AV_TABLE) and one CQ; fi_getname's address to the bootstrap.
//   - Endpoint(r): fi_av_insert of r's address; the first Send opens a
//     session with a job-key hello (auth.go).
//   - Send: fi_injectdata or fi_senddata (the first, smallest class),
//     fi_tinjectdata or fi_tsenddata (the others, the tag naming the
//     class), from a registered send buffer when the frame is above the
//     inject size; the CQ data is the session's token, the no-credit bit
//     and the sequence number; -FI_EAGAIN is core.ErrNoResources.
//   - the receive-buffer layout: fi_recv of the first class's buffers on
//     the untagged queue, fi_trecv of the others' under their class's tag.
//   - Progress: fi_cq_read (fi_cq_readerr for an error completion):
//     frames delivered in order and their buffers posted again, send and
//     RDMA completions.
//   - RegisterMem, DeregisterMem: fi_mr_reg and fi_close behind gobtl's
//     own cache; Put, Get: fi_writemsg (delivery complete), fi_readmsg.
//   - Arm, Notify: fi_trywait, then poll on the CQ's FI_WAIT_FD.
//   - OnPeerLost: error completions, pidfds on this host, probes across.
//   - Close: a goodbye to every peer, then fi_close of each object.
//
// The default stack runs btl "ofi" between nodes where libfabric has a
// provider with hardware behind it (ChooseNet: verbs or psm3 on an RDMA
// device that is not rxe or siw, efa, cxi, opx, psm2), softrc otherwise.
//
// # Eager frames: receive classes and credits
//
// Frames go by send (inject when they fit the provider's inject size,
// else from a send buffer) into receive buffers the module posts; the
// receive-buffer policy's layout decides how many and of which sizes,
// the first queue on the untagged receive queue and one tag per other
// queue (queues.go says why, and how
// per-peer, shared and B-SRQ layouts map onto one RDM receive queue, and
// how they are scaled to the provider's queue depth). Every class runs
// credits (credits.go: seed 000 §4.2's static scheme, piggybacked and
// explicit returns, the backlog bit). A frame refused for lack of a
// credit, a send buffer or room in the provider's queue (-FI_EAGAIN) is
// refused with core.ErrNoResources before anything of it is spent: back
// pressure, never a lost frame. Endpoints tell the PML about it as ib's
// do (core.Resources): FragsInFlight counts frames sent from send
// buffers and not completed, and those waiting for the session;
// Replenished moves at a send completion, a credit return, a session up,
// a waiting frame gone, and at every refusal by the provider's queue,
// whose end the module cannot see; PreferRendezvous, where the
// flow-control policy asks for rendezvous out of credits, while a
// per-peer class has none. A provider may complete receives out of
// order (rxm completes a long message, which it moves by rendezvous,
// after shorter ones sent later); a 16-bit sequence number per session
// in each frame's CQ data restores the order before delivery.
//
// Multi-receive buffers (FI_MULTI_RECV), seed 002's slab with perfect
// packing, work in libfabric 1.17 on ofi_rxm only (package fabric tests
// them; sockets refuses them, shm faults): they are not used yet.
//
// # RDMA, registration and the FIN
//
// Put and Get are fi_writemsg and fi_readmsg on memory registered with
// fi_mr_reg (provider keys and virtual or offset addresses as the
// domain's mr_mode says; keys of our own are drawn at random, so that a
// process outside the job cannot guess one). RegisterMem goes through a
// cache of registrations of its own, each holding its Go memory pinned
// (runtime.Pinner); libfabric's memory-hook cache is off
// (FI_MR_CACHE_MONITOR=disabled), since it cannot see Go free memory.
//
// The rdma_write rendezvous sends its FIN once the Put has completed at
// its initiator (RDMADone); the FIN is correct only if that completion
// means the bytes are in the target's memory when the FIN's handler runs.
// Open MPI's btl/ofi refuses rxm for want of that guarantee. Here:
//
//   - The module asks fi_getinfo for FI_DELIVERY_COMPLETE as a transmit
//     operation flag and sets it on every write: a write completes when
//     its data is visible at the target, whatever path the FIN takes (the
//     PML sends one per rail, on the rail). tcp under ofi_rxm, sockets,
//     shm and net (1.17's native TCP endpoint, which 1.18 calls tcp) all
//     take the flag in libfabric 1.17.
//   - A provider that does not take it is asked for FI_ORDER_SAW (a send
//     after a write is processed after it): the FIN, sent on the write's
//     own endpoint after its completion, then still finds its bytes.
//   - A provider with neither offers no RDMA (its endpoints are no
//     core.RDMA, whose set is Put and Get together): the PML uses the
//     pipeline. A read alone would need no such promise — a read's
//     completion at the reader means its bytes are there — but the
//     contract has no Get-only set (core's package doc); tcp under
//     ofi_rxm, sockets and shm all take the flag.
//
// Per provider: tcp/rxm runs one TCP connection per pair of endpoints
// and places a write's bytes before it reads the next message off the
// stream; sockets likewise; shm processes a peer's commands in order and
// completes a write once its copy into the target is done. So on these
// three a FIN on the write's own rail would find its bytes even without
// the flag. TestAFrameSentAfterAPutFindsThePutsBytes checks it, on these
// three and on net, with the FIN on the write's own rail and on another
// domain's: a write reported done before its bytes landed fails the
// second (tried: 89 of 232).
//
// # Interrupts (rdma_read_async)
//
// core.Notifier arms the CQ's wait object (FI_WAIT_FD, fi_trywait, then
// poll on the fd from a goroutine that never calls libfabric; seed 004
// §4.3: one notification per Arm). libfabric has no solicited events: an
// armed waiter wakes at the next completion of any kind, early but never
// late. The module is a core.Notifier only where the provider moves data
// without the peer's process calling in — a read of a peer that computes
// must complete: sockets (its own progress thread) and hardware providers;
// not tcp under ofi_rxm, which says FI_PROGRESS_AUTO but in 1.17 serves
// a read only when its target polls, nor shm, which has no wait fd.
// Elsewhere the CQ is opened without a wait object (FI_WAIT_NONE): on
// tcp under rxm a wait fd cost every completion a write to the CQ's
// signal pipe and a read to drain it (8 B latency 1.2-1.4x, 1 MiB 1.1x).
// Nor is auto progress asked for there: tcp's progress thread woke at
// every arriving message and took the provider's lock beside the polling
// rank for nothing a rank uses.
//
// # Trust
//
// Nothing from outside the job is delivered (auth.go): every direction
// of every pair of ranks is a session opened by a hello that proves the
// job key, and every later message carries the session's token; anything
// else is dropped and counted (rejected), a message too long for its
// buffer included, and the buffer posted again. A process outside the
// job that sends to an endpoint costs it a few buffers for a moment
// (TestAForeignSenderDoesNotDisturbTheJob), and cannot park messages in
// the provider under tags no class uses: sink receives take those
// (queues.go; TestForeignMessagesOnAnyTagAreTakenAndRejected, on tcp,
// sockets and net; not on shm, whose regions only the job's user can
// write). RDMA needs a registration's
// key, which only the peer a rendezvous is with learns. Providers with
// authorization keys of their own (auth_key_size > 0, listed by gobtl
// info ofi) fence jobs in the fabric as well, with the provider's default
// key: on cxi the VNI the launcher grants the job (SLINGSHOT_VNIS), and
// a warning where there is none (fence.go).
//
// # Lost peers
//
// libfabric reports a dead peer only when an operation to it fails, and
// not at all on shm; live.go watches peers by pidfd on this host and by
// probes across hosts. A lost peer fails every later Send, Put and Get,
// and those in flight, with an error wrapping core.ErrPeerLost; a peer
// that closed (its goodbye, after its last frame) fails them too but is
// not reported lost.
package ofi
