// Package sm is the shared-memory BTL: ranks on one host exchange frames
// through files under /dev/shm that every rank maps, in the design of Open
// MPI's vader (btl/sm since 5.0). A rank reaches the ranks the engine that
// started the job puts on its node (BTLEnv.Locality) and that see the
// same /dev/shm; the job's network BTLs serve the others.
//
// Each rank owns one segment, named after the job (core.ShmPrefix) and a
// random part that peers learn through the bootstrap, that holds what
// other ranks write to it and what it lends them. It is made and opened
// as package jobfile makes and opens a job's files: exclusively, 0600,
// through no link, checked by fstat, its pages reserved (a full /dev/shm
// is an error at start that says what was needed and what is free). Its
// name lives only through start-up: after the address exchange every rank
// maps its node's peers' segments (Attach) and, after the mapping fence,
// unlinks its own (Unlink, as vader does), so that a job killed outright
// leaves nothing in /dev/shm. What a peer writes into shared memory —
// ring and FIFO positions, descriptors, fragment lengths and offsets,
// read records, the control block's layout — is checked against what
// this rank mapped before it is used, and a bad value fails the peer with
// ErrBadFrame. A segment holds:
//
//   - a fast box per sender: a single-producer ring of slots carrying
//     small frames inline, each slot starting a cache line, so that a
//     small message (up to 24 payload bytes) is one line. The receiver
//     polls the slot at its read position and nothing else, so an idle box
//     costs one cache line that stays in the receiver's cache. The sender
//     keeps the header words of the lines ahead of its position zeroed,
//     zeroing after it publishes, so a stale slot is never mistaken for a
//     new one and publishing a small frame writes its line alone; it reads
//     the receiver's position only when its cached copy holds it back.
//   - a multi-producer FIFO of fragment descriptors: a bounded array queue
//     (Vyukov's) in which senders claim cells with a CAS and the receiver
//     reads the cell at its position. Frames too large for a fast box, or
//     sent while a box is full, travel in fragments that live in the
//     sender's segment; the receiver marks a fragment done after its
//     handler ran and the sender takes it back.
//   - a list of the senders whose fast boxes are in use, so that polling
//     touches the boxes of active peers only: one line for the FIFO plus
//     one per active peer.
//
// Every frame carries a per-pair sequence number (in the slot header or
// the fragment header), so frames from one sender are delivered in the
// order they were sent whichever path each took.
//
// Rendezvous data moves with one copy by cross-memory attach:
// process_vm_readv and process_vm_writev are the RDMA Get and Put, and a
// MemKey carries the owner's pid and the buffer's address. Whether CMA
// works is decided at start (Yama's ptrace_scope, a container's seccomp
// filter that refuses the calls — Open MPI issue #4948) and checked once
// per peer; without it the module offers no RDMA and the PML's
// copy-in/copy-out pipeline through the FIFO's fragments carries large
// messages. The single_copy parameter chooses: "cma", "none" or "auto".
// A large read goes from both ends (coop.go): the reader reads chunks from
// the back while the sender, as long as it polls, writes chunks from the
// front with process_vm_writev, so that both cores copy and every byte
// moves once. Which of CMA and the pipeline a message takes is the
// mechanism table's (mechanism.go), or with choose_mechanism the
// receiver's, by what each delivered lately (adapt.go).
//
// # The mechanism table and the copy pipeline
//
// The module proposes, per message size and per how many rendezvous
// sends to the peer are in flight, CMA or the copy pipeline with its
// fragment size and depth (core.MechTable in Attrs.Mech; a stack
// replaces it with mechanism blocks), and the PML follows. The default
// (mechanism.go has the numbers): the pipeline up to 512 KiB, and above
// it a CMA read from both ends (coop.go: the receiver reads chunks from
// the back while the sender writes from the front, each moving about
// half) — on a 16-core Xeon the pipeline lost to Open MPI's single CMA
// copy from 1 MiB, and under load on a 2-core VM it fell to 2.4 GB/s
// where the split copy kept 12-14. On a node with more ranks than
// CPUs the default is CMA above 16 KiB at any depth, since the pipeline
// needs both processes running at once and a CMA read only the receiver —
// except for the messages of an exchange (Attrs.MechExchange: recursive
// halving and doubling, where both ranks send and wait), which pipeline
// up to 512 KiB. A stack's own mechanism blocks are kept as given.
//
// The pipeline's fragments are max_send_size, 64 KiB: the PML cuts a
// medium message into power-of-two chunks and a long one into whole
// fragments (17 frames per MiB), and a segment holds 32 of them. The
// sender writes a fragment through the caches (copy_in = "cache", the
// default), with non-temporal stores ("stream": the receiver then reads
// from memory, which wins only where the two cores share no cache), or
// times its own copies around rare probes and keeps the faster with a
// hysteresis band ("auto", copyin.go; off by default: under load it
// measured no better than either).
//
// # Liveness
//
// Each peer's process is watched through a pidfd, polled from
// Progress when it has been idle for a while, and a segment states whether
// its owner closed cleanly or failed. A peer that dies without closing is
// reported through OnPeerLost; a peer that closed makes later sends fail
// with ErrPeerLost.
package sm
