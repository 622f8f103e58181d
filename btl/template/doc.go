// Package template is the skeleton of a BTL, in the spirit of Open MPI's
// opal/mca/btl/template: a new transport starts by copying this directory.
// Unlike Open MPI's, it works — frames go between the ranks of one host
// over Unix SOCK_SEQPACKET sockets, which keep message boundaries and
// order and push back when the receiver falls behind — so that the BTL
// conformance suite (btltest) runs against it in CI and the skeleton
// cannot rot. Replace the sockets with the device and keep the shape.
//
// What a BTL is made of, file by file:
//
//   - component.go declares the parameters (the shared ones through
//     core.BTLParam, with this transport's defaults; its own with a type,
//     a default, a doc and, for numbers, a range) and registers the
//     component from init. Open receives a core.BTLEnv — the block's
//     parameters, the job's bootstrap, clock, logger and metrics — and
//     everything the transport needs comes through it: a BTL imports
//     core and its own device packages, never the launcher or a policy.
//     Open publishes this rank's address with Boot.Put; peers read it
//     with Boot.Get after the job's fence.
//   - module.go is the core.Module: Attrs (limits and performance model:
//     with the capability sets below, the only things the PML decides
//     from), Endpoint (connects on first use), Register (the handler
//     table), OnPeerLost, Progress (delivers frames, reports lost peers,
//     never blocks), Disconnect (drops one peer so that it learns of it:
//     here both sockets close) and Close. The endpoint's Send copies the
//     frame out before it returns and says core.ErrNoResources when the
//     device is full, core.ErrPeerLost when the peer is gone.
//
// Concurrency (core.Module): the caller serializes every call into a
// module, so the module's own state needs no lock — one transmit buffer
// and one receive buffer serve all peers. Handlers run inside Progress and
// may Send.
//
// Optional capabilities are sets, each one interface found by type
// assertion (the table in core's package doc): an endpoint that
// implements core.RDMA, on a module that implements core.Registrar, gets
// rendezvous data by Put or Get — a configuration without RDMA hands out
// endpoints of a type without Put and Get (inproc's rdmaEndpoint embeds
// its plain endpoint); core.Eager is an eager fast path in place (sm);
// core.Resources tells the PML of credits and send buffers (ib, sm); a
// module that implements core.Notifier can wake a sleeping progress
// thread. There are no capability flags to set: core.CapsOf derives them.
// This skeleton offers none of the sets, so the PML moves large messages
// through its send pipeline; sm and inproc show them, and btltest checks
// each set a transport offers.
//
// Trust: only this user can reach a rank's socket (it lives in a
// directory of mode 0700), which is all a transport within one host
// needs. A transport that crosses hosts must also prove job membership on
// every link before it reads the link's bytes, with the job's key
// (core.BTLEnv.Key): softrc's TCP links and the EXTOLL software card's
// engines run core's challenge–response (core/auth.go) at a link's start;
// btl/ofi opens a session per direction with a hello that proves the key
// and tags every message after it with the session's token.
//
// To start a new BTL: copy the directory, rename the package and the
// component (Name), replace the sockets with the device, and keep
// conformance_test.go passing (add a Kill hook so that the peer-loss test
// runs). Import the package from components.go to compile it into gobtl.
package template
