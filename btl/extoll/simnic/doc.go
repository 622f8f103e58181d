// Package simnic is a simulated EXTOLL card: the nic.Device interface in
// virtual time under package sim's scheduler, so that the unchanged
// extoll BTL and its VELO engines (static and dynamic credit flow
// control, seed 003 §5–6) run at hundreds or thousands of ranks in one
// process. It is the extoll BTL's transport "sim" (btl "extoll" {
// transport = "sim" }); a rank's device finds its fabric through the job
// id of the rank's bootstrap, whose scheduler must be registered
// (sim.Sched.Register).
//
// One NIC serves a node: the node_size consecutive ranks of a node share
// its port, as processes share the card, while each has its own VELO
// mailbox (VELO is virtualised per process, §2). The port follows the
// LogGP model of sim.Link: every VELO packet is one 64-byte message on
// it, an RMA put carries its request and data, a get sends a request and
// the target's port sends the data back. Packets between two processes of
// one node loop through their card and pay its port like any other.
//
// What it keeps from the hardware, as softnic does (nic package doc):
//
//   - VELO packets from one sender land in the order it sent them (a
//     port's departures and arrivals are FIFO), in the receiver's mailbox
//     in arrival order, interleaved with other senders'.
//   - Back-pressure: a packet counts against the mailbox from the moment
//     it leaves until the receiver releases its slot. A sender that finds
//     the mailbox full waits in virtual time — the network holds the
//     packet and finally blocks the node — for at most the stall bound,
//     then fails with core.ErrStalled, counting velo_blocked,
//     velo_blocked_ns and velo_stalls as softnic does. The shared-memory
//     path of softnic behaves alike: its TryPut succeeds or the sender
//     waits.
//   - The card's transmit queue holds 64 VELO packets: a process that
//     writes more stalls in its programmed writes, in virtual time, until
//     the port has sent enough (Stats.TxWait).
//   - RMA checked at the target against the key, the region's bounds and
//     its access, as the ATU does; at most 256 operations outstanding per
//     connection (softnic's bound), beyond which Put and Get fail with
//     core.ErrNoResources; an origin notification for every operation and
//     a target notification when asked.
//
// Simplified, and said so: no job-membership handshake (every rank lives
// in this process's one fabric, and nothing else can reach it); RMA
// responses cost latency but no port time; a device that has closed
// swallows what is sent to it, and no peer is ever reported lost.
//
// Accounting for the simulator's report, per device: the mailbox the
// device would map (slots × 64 bytes) and the most slots occupied at once,
// the memory registered with the ATU and its peak, VELO packets sent and
// RMA operations. The device stores only the slots in use, growing the
// ring as packets land, so a large job's mailboxes cost the simulator
// what they hold, not what they could hold.
package simnic
