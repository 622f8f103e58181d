package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
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
		return func(g *grpc.Server) { pb.RegisterFlowControlServer(g, &flowService{s: s}) }
	case core.KindRecvBuf:
		return func(g *grpc.Server) { pb.RegisterRecvBuffersServer(g, &recvService{s: s}) }
	case core.KindSched:
		return func(g *grpc.Server) { pb.RegisterSchedulerServer(g, &schedService{s: s}) }
	}
	panic("sdk: no service for kind " + string(k))
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

type flowService struct {
	pb.UnimplementedFlowControlServer
	s *server
}

func (f *flowService) Setup(_ context.Context, m *pb.FlowInfo) (*pb.FlowSetupReply, error) {
	var r pb.FlowSetupReply
	err := f.s.call(core.KindFlowControl, func(pol any) error {
		setup, err := pol.(core.FlowControl).Setup(wire.FlowInfoFromPB(m))
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Setup = wire.FlowSetupToPB(setup)
		}
		return nil
	})
	return &r, err
}

func (f *flowService) Observe(st grpc.BidiStreamingServer[pb.FlowEvents, pb.FlowDecisions]) error {
	o := observer[core.FlowEvent, core.FlowDecision, pb.FlowEvents, pb.FlowDecisions]{
		s: f.s, kind: core.KindFlowControl,
		decode: func(m *pb.FlowEvents, dst []core.FlowEvent) (uint64, []core.FlowEvent, error) {
			d, err := wire.FlowEventsFromPB(m, dst)
			return m.Seq, d, err
		},
		encode: wire.AppendFlowDecisions,
		observe: func(pol any, es []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
			return pol.(core.FlowControl).Observe(es, out)
		},
	}
	return o.serve(st)
}

type recvService struct {
	pb.UnimplementedRecvBuffersServer
	s *server
}

func (rs *recvService) Setup(_ context.Context, m *pb.RecvInfo) (*pb.RecvSetupReply, error) {
	var r pb.RecvSetupReply
	err := rs.s.call(core.KindRecvBuf, func(pol any) error {
		setup, err := pol.(core.RecvBuffers).Setup(wire.RecvInfoFromPB(m))
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Setup = wire.RecvSetupToPB(setup)
		}
		return nil
	})
	return &r, err
}

func (rs *recvService) Observe(st grpc.BidiStreamingServer[pb.RecvEvents, pb.RecvDecisions]) error {
	o := observer[core.RecvEvent, core.RecvDecision, pb.RecvEvents, pb.RecvDecisions]{
		s: rs.s, kind: core.KindRecvBuf,
		decode: func(m *pb.RecvEvents, dst []core.RecvEvent) (uint64, []core.RecvEvent, error) {
			d, err := wire.RecvEventsFromPB(m, dst)
			return m.Seq, d, err
		},
		encode: wire.AppendRecvDecisions,
		observe: func(pol any, es []core.RecvEvent, out []core.RecvDecision) []core.RecvDecision {
			return pol.(core.RecvBuffers).Observe(es, out)
		},
	}
	return o.serve(st)
}

type schedService struct {
	pb.UnimplementedSchedulerServer
	s *server
}

func (ss *schedService) Setup(_ context.Context, m *pb.SchedInfo) (*pb.SchedSetupReply, error) {
	var r pb.SchedSetupReply
	err := ss.s.call(core.KindSched, func(pol any) error {
		setup, err := pol.(core.Scheduler).Setup(wire.SchedInfoFromPB(m))
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Setup = wire.SchedSetupToPB(setup)
		}
		return nil
	})
	return &r, err
}

func (ss *schedService) Observe(st grpc.BidiStreamingServer[pb.SchedEvents, pb.SchedDecisions]) error {
	o := observer[core.SchedEvent, core.SchedDecision, pb.SchedEvents, pb.SchedDecisions]{
		s: ss.s, kind: core.KindSched,
		decode: func(m *pb.SchedEvents, dst []core.SchedEvent) (uint64, []core.SchedEvent, error) {
			d, err := wire.SchedEventsFromPB(m, dst)
			return m.Seq, d, err
		},
		encode: wire.AppendSchedDecisions,
		observe: func(pol any, es []core.SchedEvent, out []core.SchedDecision) []core.SchedDecision {
			return pol.(core.Scheduler).Observe(es, out)
		},
	}
	return o.serve(st)
}
