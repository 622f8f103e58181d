// Package simrc is a simulated InfiniBand HCA: the verbs interface of
// package verbs, in virtual time under package sim's scheduler, so that
// the unchanged ib BTL, its credit engine and receive queues run at
// thousands of ranks in one process. It is the "sim" provider (btl "ib"
// { provider = "sim" }); a job's devices find their fabric through the
// job id of the rank's bootstrap, whose scheduler must be registered
// (sim.Sched.Register).
//
// Links follow LogGP (Alexandrov et al.): a message of n bytes posted at t
// leaves its port at max(t+o, the port's previous departure + max(g, n·G))
// and lands L later; the destination port takes n·G per message in
// arrival order (so incast queues). The receive side's overhead o_r is
// CPU time: a rank that polls k received frames from its CQ is busy for
// k·o_r of virtual time before it handles them, and what lands meanwhile
// waits for its next poll — so frames batch up per progress call as in a
// real process. L, o, o_r, g and G (from the rate) are per port,
// configurable like softrc's rate.
//
// What it keeps from the hardware, as softrc does (verbs package doc):
//
//   - RC QPs with RESET → INIT → RTR → RTS → ERR; reliable, in-order
//     delivery per QP (a port's departures and arrivals are FIFO); a
//     packet that reaches a QP not yet ready is dropped and resent after
//     the ACK timeout, retry_cnt times.
//   - Receive WQEs consumed in FIFO order from the QP or its SRQ; a
//     message longer than the head buffer fails both QPs.
//   - RNR NAK when no receive WQE is posted: the requester waits the
//     responder's min_rnr_timer and resends from the NAKed request (the
//     packets behind it are dropped, go-back-N), rnr_retry times (7:
//     forever).
//   - SRQ limit: armed, it raises EventSRQLimitReached once when posted
//     WQEs fall below the limit.
//   - RDMA write and read checked against the remote key, range and
//     access; at most max_rd_atomic reads outstanding per QP, later work
//     requests wait behind them in order.
//   - CQs with solicited-only or next-completion arming, one event per
//     arming; UD QPs with a GRH in front of every received datagram (the
//     BTL's connection manager).
//
// Simplified, and said so: ACKs and RDMA read requests cost latency but no
// link time; responders serve any number of reads at once; CQs do not
// overrun; an MR's keys are one number.
//
// Accounting for the simulator's report: per device the bytes registered
// (the BTL's receive and send buffers and pinned user memory) and their
// peak, the receive WQEs posted per QP and SRQ and their peak, messages
// and bytes by opcode, RNR NAKs.
package simrc
