// Package softrc is a software InfiniBand HCA: the verbs interface of
// package verbs with the Reliable Connection semantics the ib BTL relies
// on, over TCP, so that gobtl's InfiniBand path runs — and is tested —
// on machines without InfiniBand or kernel RDMA, and between real hosts.
//
// What it keeps from the hardware (IBA volume 1, ch. 9–11; seed 000 §2;
// seed 002 §1; seed 004 §2, §4.2):
//
//   - RC QPs with the RESET → INIT → RTR → RTS → ERR state machine; per-QP
//     reliable, in-order delivery with PSNs, ACKs (delayed and piggybacked,
//     as an HCA coalesces them) and go-back-N retransmission.
//   - Receive WQEs consumed in FIFO order; a message longer than the head
//     buffer completes in error (local length error at the responder,
//     remote invalid request at the requester) and both QPs go to ERR.
//   - No receive WQE posted: the responder sends an RNR NAK carrying its
//     min_rnr_timer; the requester waits that long and retries, rnr_retry
//     times (7 = forever), then completes with "RNR retry exceeded" and the
//     QP goes to ERR. Packets behind the NAKed one are dropped and resent.
//   - RDMA write and read checked against the key, the registered range,
//     the protection domain and the access flags of region and QP; a
//     violation NAKs "remote access error" and both QPs go to ERR.
//   - At most max_rd_atomic reads outstanding per requester QP (later work
//     requests wait, in order) and max_dest_rd_atomic served per responder.
//   - ACK timeout (4.096 µs × 2^timeout) with retry_cnt retransmissions;
//     a packet for a QP that is not ready is dropped and comes again.
//   - CQs with solicited-only or next-completion notification on a
//     completion channel, one event per arming; SRQs with srq_limit and the
//     limit-reached async event; UD QPs with address handles and a GRH in
//     every receive buffer (the ib BTL's connection manager uses them).
//   - Several ports per device and several devices per process; each port
//     has an optional link rate (a token bucket on its egress) and delay.
//     Ports of different processes may name one shared link and split its
//     rate, as the ranks of two jobs on one node share an HCA port
//     (link_shared.go).
//
// The wire: a port listens on TCP; its GID is its IP address
// (IPv4-mapped) and its LID its TCP port, as RoCE derives GIDs from IP
// addresses. Packets of all QPs between two ports share one TCP
// connection (a link) and are demultiplexed by destination QP number
// (two ports that dialed each other at once both send on the connection
// the smaller address dialed, and polls do not read the other);
// a link between two ports of one host runs an unpaced congestion
// control whatever the host's default (BBR paces loopback, port.go). A
// link carries nothing until both ends have proved they hold the job's
// key (auth.go), and a QP takes packets only from its peer's port and QP.
// Payloads go from registered memory to the socket with sendmsg and from
// the socket into registered memory with recvfrom: no intermediate copy
// for large messages. The wire's calls are raw (the scheduler never sees
// them) and non-blocking by their own MSG_DONTWAIT (syscall.go).
//
// Who does the NIC's work: two facts measured on this project's machines
// decide it. A wake-up through Go's netpoller across cores costs ~37 µs,
// and with two ranks on two cores a process owns one core, so a second
// spinning thread would halve it. softrc therefore does the device's work
// inline — in PostSend and in CQ polls — while the process polls, paying
// one non-blocking syscall per poll and no cross-thread hand-off. A device
// goroutine sleeps in epoll_wait and takes over the wire only when the
// process has not polled for IdleAfter (an idle timer the polls keep
// pushing out): then it places RDMA writes, serves RDMA reads, sends ACKs
// and raises solicited events without the process calling in, as a NIC
// does, until the process polls twice in a row and takes the wire back. That is what makes RDMA-read rendezvous overlap computation (seed
// 004 §4.2–4.3) and what lets an armed completion channel wake a sleeping
// progress thread.
//
// Fault hooks (DropLinks, DelayLinks, KillPort) and counters (Stats: RNR
// NAKs sent and received, retries, bytes, reads outstanding, ...) serve
// tests and benchmarks.
package softrc
