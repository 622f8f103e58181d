// Package velo is libvelo: VELO packets to and from the mailbox, with the
// end-to-end credit flow control of seed 003 §5–6 built in and invisible to
// the layers above (§4: "entirely implemented within the libvelo library").
//
// The hardware has none: a full mailbox blocks the sending node (§2). So
// every receiver splits its mailbox, logically, into a data region and a
// credit region. Each sender owns credits for the data region — one credit,
// one slot — and each receiver owns credit_slots slots of the credit region
// in each of its senders' mailboxes for the credit packets it sends back.
//
// The mechanism here runs on every packet; a flow-control policy
// (core.FlowControl: policies/flowcontrol/...) chooses its parameters and,
// for the dynamic scheme, moves quota between senders. The policy proposes,
// the mechanism disposes: every decision is checked before it is applied.
//
// Sender side (per destination): a credit counter; packets go out while it
// lasts, the rest wait, in order, in a backlog (§5.2 — the receiver
// reassembles partial messages, so a message longer than the credits
// cannot deadlock); compulsory-return requests and responses consume a
// credit and jump the backlog (§6.1).
//
// Receiver side (per sender): the retrieved-packets counter and a FIFO of
// credit_slots+1 thresholds; when the counter reaches the head, the head is
// popped, a new threshold is computed by Equation 1,
//
//	threshold = quota div (credit_slots + 1) + 1,
//
// pushed, and that many credits go back in a credit packet, which itself
// needs no credit. In the static scheme (§5) every threshold is the same,
// quota is data_region/n and a sender starts with its whole quota. In the
// dynamic scheme (§6) a sender starts with its static slots (credit_slots,
// Equation 2), the FIFO starts as ones, the quota is the sender's intended
// quota, which the policy adjusts, and credits come from a shared pool (the
// available slots counter) so that busy senders can hold more than their
// share. Every credit_slots+1 pops is a monitoring point, reported to the
// policy (§6.4). A receiver whose policy steals from a victim sends it a
// compulsory credit return request and marks it blocked until the response
// comes back (§6.5.2); a blocked sender gets a credit at a threshold only
// if it holds fewer than its static slots.
//
// Piggybacking (§5.4): a data packet with at most 54 bytes of payload — in
// practice the last of a message — carries owed credits in the last two
// bytes of its slot, flagged by the spare header bit. Credits returned this
// way are counted (the piggybacked credits counter) and the threshold can
// also be reached "the piggyback way" when retrieved + piggybacked reaches
// it; the credits then still due are the new threshold minus what was
// already piggybacked (adjustment by deficit), or, when more was already
// returned, the next threshold grows by the excess (§6.6.2). Where the
// piggyback way overshoots the head, the overshoot is returned as well, so
// that a sender's balance does not depend on which way the threshold was
// reached (the paper says only that this "should later be taken into
// consideration").
//
// Three checks make the mechanism safe whatever the policy proposes; with
// the paper's parameters they never fire, and they are counted when they
// do:
//
//   - the data region: every credit granted comes out of the free data slots
//     (the available slots counter), and each sender's static slots are a
//     reserve no other sender can take, so a sender can always get back to
//     its static slots (§6.3: "the minimum credit quota a given sender can
//     own at any time");
//   - the credit region: packets from one peer are consumed in the order it
//     sent them, so before a receiver sends its (j+credit_slots)-th credit
//     packet it checks that the sender has sent or returned more than it
//     could have without reading credit packet j; otherwise the credits stay
//     owed (they can still ride a piggyback). This is the guarantee Equation
//     1 gives by construction, checked directly;
//   - liveness: a threshold is never above what the sender can still send
//     (its credits and the packets in flight); if it is, it is lowered, and
//     a sender left with nothing gets a credit at once. The paper leaves
//     open what happens to the thresholds of a victim after a compulsory
//     return, which can leave a threshold out of reach.
//
// The scheme is chosen once, at New, as an object (scheme.go): none, which
// hands packets straight to the device, or credits (credits.go) — the
// sender side in backlog.go, the receiver side in receiver.go,
// piggybacking in piggyback.go — over a static (static.go) or dynamic
// (dynamic.go) data region. The policy is driven by core/policy's Driver.
//
// An Engine is not safe for concurrent use: the BTL calls it from its
// progress path.
package velo
