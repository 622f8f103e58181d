// Package btltest is the conformance suite every BTL must pass, in the
// spirit of Open MPI's btl/template: a transport that passes it can be
// driven by the PML.
//
// Run opens a job's worth of modules of one registered component inside
// the test process, connected by an in-process bootstrap (boot.Group),
// and checks the contract of core.Module and core.Endpoint:
//
//   - attributes are consistent and endpoints are reachable by rank;
//   - frames of every size from 0 to MaxSendSize arrive intact, with the
//     header's match fields as sent, split between pre and data anywhere;
//   - frames from one sender arrive in the order sent, whatever their
//     sizes, also with several senders to one receiver;
//   - handlers may send (to the sender, to a third rank, to themselves)
//     from inside Progress;
//   - a receiver that does not progress makes Send return ErrNoResources
//     within a bounded amount of data, and nothing is lost when it resumes;
//   - Put and Get (when the endpoint has the RDMA set) move every size at
//     any offset and complete inside Progress; keys out of range fail;
//   - an RDMA endpoint's module registers (core.Registrar: the set is
//     whole);
//   - a module with a notifier wakes an armed waiter for a solicited frame
//     or RDMA completion, at once when one is pending, and once per Arm;
//   - an endpoint with the eager fast path (core.Eager) keeps the pair's
//     order with Send and Progress, shows only the in-order EAGER frame
//     asked for, leaves a frame it shows and the PML does not take to
//     Progress, finds nothing from a handler or a lost peer, and
//     allocates nothing;
//   - an endpoint with the resources set (core.Resources) refuses the same
//     send while Replenished stands, passes one only after it moved, and
//     counts its frames in flight back to zero;
//   - a peer that dies is reported through OnPeerLost with ErrPeerLost, and
//     sends to it fail;
//   - a peer a module disconnects hears of it through its own OnPeerLost,
//     and sends either way fail;
//   - Close releases the module; using it afterwards is an error, not a
//     crash;
//   - the eager path (Send plus the Progress that delivers it) allocates
//     nothing.
//
// A transport test calls Run with its component name and the parameters
// to open it with:
//
//	func TestConformance(t *testing.T) {
//		btltest.Run(t, btltest.Config{Component: "sm", Kill: ...})
//	}
//
// Variants run the suite once per configuration worth checking:
//
//	btltest.Run(t, btltest.Config{Component: "inproc", Variants: []btltest.Variant{
//		{Name: "defaults"},
//		{Name: "tiny rings", Params: map[string]string{"slots": "4"}},
//	}})
//
// A transport that reaches only its own rank (btl/self) sets Loopback: every
// frame then goes from a rank to itself.
package btltest
