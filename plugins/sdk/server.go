package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/internal/wire"
	pb "github.com/gobtl/gobtl/plugins/policypb"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// server holds the plugin's policies, one per kind, built by Configure.
// mu serialises every call into them: policies are written as
// single-threaded code (the built-ins are), while gRPC serves Setup and
// the Observe stream on goroutines of its own.
type server struct {
	p   Plugin
	log hclog.Logger

	mu       sync.Mutex
	policies map[core.Kind]any
	broken   error // set by a panic; every later call fails with it
}

// call runs f on the policy of kind under the lock, turning a panic into
// a gRPC error the host reads as a failed plugin.
func (s *server) call(kind core.Kind, f func(policy any) error) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return status.Error(codes.Internal, s.broken.Error())
	}
	pol := s.policies[kind]
	if pol == nil {
		return status.Errorf(codes.FailedPrecondition, "%s policy used before Configure", kind)
	}
	defer func() {
		if r := recover(); r != nil {
			s.broken = fmt.Errorf("%s policy %q panicked: %v", kind, s.p.Name, r)
			s.log.Error("policy panicked", "kind", string(kind), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, s.broken.Error())
		}
	}()
	return f(pol)
}

func (s *server) configure(kind core.Kind, values *pb.Values) (err error) {
	params, err := wire.ValuesFromPB(s.p.Params, values)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("constructor panicked: %v", r)
			s.log.Error("constructor panicked", "kind", string(kind), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	var pol any
	switch kind {
	case core.KindFlowControl:
		if s.p.NewFlowControl != nil {
			pol, err = s.p.NewFlowControl(params)
		}
	case core.KindRecvBuf:
		if s.p.NewRecvBuffers != nil {
			pol, err = s.p.NewRecvBuffers(params)
		}
	case core.KindSched:
		if s.p.NewScheduler != nil {
			pol, err = s.p.NewScheduler(params)
		}
	}
	if err != nil {
		return err
	}
	if pol == nil {
		return fmt.Errorf("plugin %q does not serve %s policies", s.p.Name, kind)
	}
	s.mu.Lock()
	s.policies[kind] = pol
	s.mu.Unlock()
	return nil
}

func (s *server) registerFunc(k core.Kind) func(*grpc.Server) {
	switch k {
	case core.KindFlowControl:
		fs := newFlowService(s)
		return func(g *grpc.Server) { pb.RegisterFlowControlServer(g, fs) }
	case core.KindRecvBuf:
		return func(g *grpc.Server) { pb.RegisterRecvBuffersServer(g, &recvService{service: newService(s, wire.Recv)}) }
	case core.KindSched:
		return func(g *grpc.Server) { pb.RegisterSchedulerServer(g, &schedService{service: newService(s, wire.Sched)}) }
	}
	panic("sdk: no service for kind " + string(k))
}

// newFlowService serves flow control; for a host that does not take
// FlowQuiet statements (wire.EnvQuiet unset) it drops them from answers.
func newFlowService(s *server) *flowService {
	fs := &flowService{service: newService(s, wire.Flow)}
	if os.Getenv(wire.EnvQuiet) == "" {
		fs.filter = dropQuiet
	}
	return fs
}

type pluginService struct {
	pb.UnimplementedPluginServer
	s *server
}

func (ps *pluginService) Info(context.Context, *pb.InfoRequest) (*pb.InfoReply, error) {
	r := &pb.InfoReply{Name: ps.s.p.Name, Version: ps.s.p.Version, Doc: ps.s.p.Doc}
	for _, k := range ps.s.p.Kinds() {
		r.Kinds = append(r.Kinds, string(k))
	}
	return r, nil
}

func (ps *pluginService) ConfigSchema(_ context.Context, req *pb.SchemaRequest) (*pb.SchemaReply, error) {
	return &pb.SchemaReply{Params: wire.SchemaToPB(ps.s.p.Params)}, nil
}

func (ps *pluginService) Configure(_ context.Context, req *pb.ConfigureRequest) (*pb.ConfigureReply, error) {
	if err := ps.s.configure(core.Kind(req.GetKind()), req.GetValues()); err != nil {
		return &pb.ConfigureReply{Error: err.Error()}, nil
	}
	return &pb.ConfigureReply{}, nil
}

// observer runs one Observe stream: each event batch in, the policy's
// decisions for it out, acknowledged with the batch's seq. E and D are
// core's event and decision types, EM and DM the protocol's batch messages.
type observer[E, D, EM, DM any] struct {
	s       *server
	kind    core.Kind
	decode  func(m *EM, dst []E) (seq uint64, _ []E, _ error)
	encode  func(m *DM, ack uint64, ds []D)
	observe func(policy any, es []E, out []D) []D
}

func (o *observer[E, D, EM, DM]) serve(st grpc.BidiStreamingServer[EM, DM]) error {
	var (
		in  = new(EM)
		out = new(DM)
		es  []E
		ds  []D
	)
	for {
		if err := st.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		seq, got, err := o.decode(in, es[:0])
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		es = got
		if err := o.s.call(o.kind, func(pol any) error {
			ds = o.observe(pol, es, ds[:0])
			return nil
		}); err != nil {
			return err
		}
		o.encode(out, seq, ds)
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// ---- the three policy services ----

// service serves one policy kind through its codec.
type service[I, S, E, D, IM, RM, EM, DM any] struct {
	s *server
	c wire.Codec[I, S, E, D, IM, RM, EM, DM]
	// filter, if set, edits each answer before it goes: what an older
	// host could not take out.
	filter func([]D) []D
}

// dropQuiet removes the core.FlowQuiet statements, for a host that does
// not take them (wire.EnvQuiet).
func dropQuiet(ds []core.FlowDecision) []core.FlowDecision {
	return slices.DeleteFunc(ds, func(d core.FlowDecision) bool { return d.Kind == core.FlowQuiet })
}

func (v *service[I, S, E, D, IM, RM, EM, DM]) Setup(_ context.Context, m *IM) (*RM, error) {
	var r *RM
	err := v.s.call(v.c.Kind, func(pol any) error {
		r = v.c.Reply(pol.(core.Policy[I, S, E, D]).Setup(v.c.InfoFromPB(m)))
		return nil
	})
	return r, err
}

func (v *service[I, S, E, D, IM, RM, EM, DM]) Observe(st grpc.BidiStreamingServer[EM, DM]) error {
	o := observer[E, D, EM, DM]{s: v.s, kind: v.c.Kind, decode: v.c.GetEvents, encode: v.c.PutDecisions,
		observe: v.answer}
	return o.serve(st)
}

// answer is the policy's answer to a batch, as it goes to the host.
func (v *service[I, S, E, D, IM, RM, EM, DM]) answer(pol any, es []E, out []D) []D {
	out = pol.(core.Policy[I, S, E, D]).Observe(es, out)
	if v.filter != nil {
		out = v.filter(out)
	}
	return out
}

func newService[I, S, E, D, IM, RM, EM, DM any](s *server, c wire.Codec[I, S, E, D, IM, RM, EM, DM]) service[I, S, E, D, IM, RM, EM, DM] {
	return service[I, S, E, D, IM, RM, EM, DM]{s: s, c: c}
}

// The registered services: a kind's service, with the generated
// Unimplemented server one level down, so that the service's methods are
// the ones promoted.
type (
	flowService struct {
		service[core.FlowInfo, core.FlowSetup, core.FlowEvent, core.FlowDecision, pb.FlowInfo, pb.FlowSetupReply, pb.Events, pb.Decisions]
		flowBase
	}
	flowBase struct {
		pb.UnimplementedFlowControlServer
	}
	recvService struct {
		service[core.RecvInfo, core.RecvSetup, core.RecvEvent, core.RecvDecision, pb.RecvInfo, pb.RecvSetupReply, pb.Events, pb.Decisions]
		recvBase
	}
	recvBase struct {
		pb.UnimplementedRecvBuffersServer
	}
	schedService struct {
		service[core.SchedInfo, core.SchedSetup, core.SchedEvent, core.SchedDecision, pb.SchedInfo, pb.SchedSetupReply, pb.SchedEvents, pb.SchedDecisions]
		schedBase
	}
	schedBase struct {
		pb.UnimplementedSchedulerServer
	}
)
