// Package ib is the InfiniBand BTL: Reliable Connection transport over the
// verbs interface of package verbs, with either provider — softrc, the
// software HCA that is always built, or rdmacore, libibverbs through cgo
// behind the rdmacore build tag.
//
// One module per port (and per path of a port: "paths" RC connections per
// peer over one port, the LMC case of seed 001 §3.3). Each module is one
// subchannel of every peer's virtual channel, so multirail (seed 001 §4)
// sees ports, HCAs and paths alike.
//
// Connections are set up on first use (see cm.go): at open a module
// publishes its address through the bootstrap — for softrc an IP the
// other nodes can reach (package netif: the block's address, if_include or
// if_exclude; loopback only when the whole job is on one node); the first Send, Put or Get
// to a peer reads the peer's address and runs a REQ/REP/RTU exchange over
// a UD QP, as Open MPI's udcm does. Frames sent meanwhile wait on the
// endpoint, in order, as on openib's pending list. A closing module says
// goodbye to its peers once its frames are acknowledged, and each peer
// answers before its connections go down, so that a clean shutdown is
// not a lost peer on either side.
//
// Eager frames are copied into pre-registered send buffers and sent into
// pre-posted receive buffers. The receive layout is a policy's (package
// policies/recvbuf: perpeer, srq, bsrq; without one the job runs the
// component's default, srq, with the block's receive_queues string if it
// has one); the mechanism here keeps per-peer queues full with credits
// (credits.go: seed 000 §4.2), feeds shared queues from slabs and grows
// them on the SRQ-limit event, picks the smallest buffer that holds each
// frame (seed 002 §3) and records buffer utilization per queue (§4). A
// frame that must wait — no credit, a shared queue at its pending bound,
// a full send queue — is refused with core.ErrNoResources and waits in the
// PML's queue, which keeps its request open until a module takes it; the
// first frame accepted after a refusal carries the backlog bit.
//
// Order: frames of one size class travel one RC QP and arrive in order;
// frames of different classes travel different QPs (B-SRQ needs a QP per
// bucket, since a QP feeds one receive queue) and may overtake each other.
// The PML restores order by PSN (seed 001 §5).
//
// Rendezvous data moves by RDMA write and read (core.RDMA) from memory
// registered through a pin-down cache (core.Registrar, regcache.go).
// core.Notifier arms the CQ for solicited events (the RNDV_START of
// rdma_read_async) and, while a solicited read is in flight, for its
// completion (seed 004 §4.3).
//
// A peer is lost when its connection fails — a QP in error, the link gone,
// no answer to a connection request: every Send, Put and Get in flight and
// later fails with an error wrapping core.ErrPeerLost that names the peer.
//
// A module's state comes in parts, each a type with its own methods, held
// by name: completions (notify.go, the CQ and its arming), sendSide
// (send.go, rdma.go: send free lists, posts, RDMA in flight), recvSide
// (queues.go: receive queues, their buffers, posts and reposts),
// creditEngine (credits.go: the flow-control scheme, the credits owed and
// their return), peers (peers.go: the endpoints by rank and QPN, those
// lost) and cm (cm.go: the connection manager, which sets each
// endpoint's connection up and down, with its connState). An endpoint
// (endpoint.go) keeps what a connection does once up: its send path,
// core.Endpoint's and core.Resources' methods, and its failure. The module (module.go, progress.go) keeps the wiring: it
// opens and closes the parts, drains the CQ and routes each completion to
// its part, and hands a received frame to its handler between the receive
// side and the credit engine. stats.go holds the counters.
package ib
