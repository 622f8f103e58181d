// Package extoll is the EXTOLL BTL (seed 003 §2–3): frames travel as
// trains of VELO packets into the receiver's mailbox, large messages move
// by RMA get, and the credit flow control of §5–6 runs inside the VELO
// layer (package velo), invisible to the PML.
//
// Eager frames — up to 2 KiB of message by default, as on the real cluster
// (§3) — are cut into packets of 56 bytes: the first carries a 24-byte
// match header (type, flags, context, tag, PSN and length; the source is
// in the VELO header), the others only data, so a 2 KiB message takes 37
// packets, the count §5.3 reasons with. Packets from one sender arrive in
// order, interleaved with other senders' in the shared mailbox; the
// receiver reassembles per source and delivers a frame that fits one
// packet straight from the mailbox slot. Rendezvous uses the PML's
// rdma_read protocol on the RMA engine: the start carries a key from the
// address-translation table, the receiver gets the data, and the origin
// notification completes the read (§3).
//
// Flow control is the job's flow_control policy: none (what the hardware
// does — a full mailbox blocks the sender, bounded by stall_timeout and
// reported as core.ErrStalled), extoll_static (§5) or extoll_dynamic (§6,
// the default). The mailbox has slots_per_peer slots for each rank of the
// job. Peers on the same (simulated) node may be left to btl/sm
// (local_peers = "exclude"); like LiMIC peers in §7.2 they then use no
// credits, and the dynamic scheme hands their unused quota to others.
//
// The device underneath is nic.Device; the software one (softnic) keeps
// mailboxes in /dev/shm for the ranks of a node and carries packets
// between nodes over TCP, from an address the other nodes can reach
// (package netif: listen, if_include or if_exclude). A node is the
// engine's (BTLEnv.Locality), or node_size ranks when simulated.
package extoll
