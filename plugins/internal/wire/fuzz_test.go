package wire

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gobtl/gobtl/core"
	pb "github.com/gobtl/gobtl/plugins/policypb"
)

// FuzzMessages decodes any bytes as each message a plugin sends the host
// (event batches on the SDK side, decision batches, setup replies and
// parameter values on the host side) and runs them through the codecs:
// an error or a result, never a panic, and a batch decodes to no more
// rows than its columns hold.
func FuzzMessages(f *testing.F) {
	add := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var ev pb.Events
	Flow.PutEvents(&ev, 3, []core.FlowEvent{{Kind: 1, Peer: 2, Quota: 3, Value: 4, At: time.Second}})
	add(&ev)
	var dm pb.Decisions
	Recv.PutDecisions(&dm, 9, []core.RecvDecision{{Kind: 1, Queue: 2, Value: 3}, {Kind: 2}})
	add(&dm)
	var se pb.SchedEvents
	Sched.PutEvents(&se, 4, []core.SchedEvent{{}})
	add(&se)
	var sd pb.SchedDecisions
	Sched.PutDecisions(&sd, 5, []core.SchedDecision{{}})
	add(&sd)
	add(Flow.Reply(core.FlowSetup{Quota: 4}, nil))
	add(&pb.Values{Values: []*pb.Value{{Name: "n", V: &pb.Value_I{I: 1}}}})
	schema := []core.Param{{Name: "n", Type: core.ParamInt, Required: true}, {Name: "s", Type: core.ParamString}}

	f.Fuzz(func(t *testing.T, b []byte) {
		var ev pb.Events
		if proto.Unmarshal(b, &ev) == nil {
			if _, es, err := Flow.GetEvents(&ev, nil); err == nil && len(es) > len(ev.GetKind()) {
				t.Fatalf("%d flow events from %d rows", len(es), len(ev.GetKind()))
			}
			Recv.GetEvents(&ev, nil)
		}
		var dm pb.Decisions
		if proto.Unmarshal(b, &dm) == nil {
			Flow.GetDecisions(&dm, nil)
			Recv.GetDecisions(&dm, nil)
		}
		var se pb.SchedEvents
		if proto.Unmarshal(b, &se) == nil {
			Sched.GetEvents(&se, nil)
		}
		var sd pb.SchedDecisions
		if proto.Unmarshal(b, &sd) == nil {
			Sched.GetDecisions(&sd, nil)
		}
		var fr pb.FlowSetupReply
		if proto.Unmarshal(b, &fr) == nil {
			Flow.FromReply(&fr)
		}
		var rr pb.RecvSetupReply
		if proto.Unmarshal(b, &rr) == nil {
			Recv.FromReply(&rr)
		}
		var sr pb.SchedSetupReply
		if proto.Unmarshal(b, &sr) == nil {
			Sched.FromReply(&sr)
		}
		var vs pb.Values
		if proto.Unmarshal(b, &vs) == nil {
			ValuesFromPB(schema, &vs)
		}
		var ps pb.SchemaReply
		if proto.Unmarshal(b, &ps) == nil {
			SchemaFromPB(ps.GetParams())
		}
	})
}
