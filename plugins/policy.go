package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/plugins/internal/wire"
	"google.golang.org/grpc"
)

// pluginPolicy is a policy served by a plugin process. It implements the
// kind's core interface (core.FlowControl for I = core.FlowInfo, ...), so
// the mechanism cannot tell it from a built-in — but for the timing of
// decisions, which the core contract allows for.
type pluginPolicy[I, S, E, D any] struct {
	*proxy[E, D]
	setupTimeout time.Duration
	rpcSetup     func(ctx context.Context, info I) (S, error)
	// fallback builds the built-in that takes over, from the Setups the
	// plugin answered.
	fallback func(infos []I, results []S) (core.Policy[I, S, E, D], string, error)

	mu      sync.Mutex
	infos   []I // every successful Setup, replayed into the fallback
	results []S
	fb      core.Policy[I, S, E, D]
	done    chan struct{} // closed by close
}

// refusedError is a policy's own refusal of a Setup: an answer, not a
// failure of the plugin.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func newPluginPolicy[I, S, E, D any](px *proxy[E, D], setupTimeout time.Duration,
	rpcSetup func(context.Context, I) (S, error),
	fallback func([]I, []S) (core.Policy[I, S, E, D], string, error)) *pluginPolicy[I, S, E, D] {
	pp := &pluginPolicy[I, S, E, D]{proxy: px, setupTimeout: setupTimeout, rpcSetup: rpcSetup, fallback: fallback, done: make(chan struct{})}
	px.newFallback = func() (observer[E, D], string, error) {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		fb, name, err := pp.fallback(pp.infos, pp.results)
		if err != nil {
			return nil, name, err
		}
		for _, info := range pp.infos {
			if _, err := fb.Setup(info); err != nil {
				px.log.Warn().Err(err).Msg(px.what + ": the fallback refused a Setup the plugin accepted; its decisions for it may be dropped by the mechanism")
			}
		}
		pp.fb = fb
		return fb, name, nil
	}
	return pp
}

// Setup asks the plugin (or, once it has failed, the fallback). It may
// block for up to the setup timeout: Setup runs before traffic.
func (pp *pluginPolicy[I, S, E, D]) Setup(info I) (S, error) {
	var zero S
	for {
		pp.mu.Lock()
		if pp.fb != nil {
			pp.infos = append(pp.infos, info)
			s, err := pp.fb.Setup(info)
			pp.mu.Unlock()
			return s, err
		}
		switch pp.state.Load() {
		case stateAborted:
			pp.mu.Unlock()
			<-pp.failed
			return zero, pp.err
		case stateClosed:
			pp.mu.Unlock()
			return zero, fmt.Errorf("%s: %w", pp.what, errClosed)
		}
		ctx, cancel := context.WithTimeout(pp.ctx, pp.setupTimeout)
		s, err := pp.rpcSetup(ctx, info)
		cancel()
		var refused *refusedError
		if err == nil {
			pp.infos = append(pp.infos, info)
			pp.results = append(pp.results, s)
		}
		if err == nil || errors.As(err, &refused) {
			pp.mu.Unlock()
			if err != nil {
				return zero, fmt.Errorf("%s: Setup: %w", pp.what, err)
			}
			return s, nil
		}
		pp.mu.Unlock()
		pp.fail(fmt.Errorf("Setup: %w", err))
		select {
		case <-pp.failed:
		case <-pp.done:
			return zero, fmt.Errorf("%s: %w", pp.what, errClosed)
		}
	}
}

func (pp *pluginPolicy[I, S, E, D]) close() {
	select {
	case <-pp.done:
	default:
		close(pp.done)
	}
	pp.proxy.close()
}

// streamLink is a kind's Observe stream: EM and DM are its protocol
// messages, reused for every batch.
type streamLink[E, D, EM, DM any] struct {
	st  grpc.BidiStreamingClient[EM, DM]
	out *EM
	in  *DM
	put func(m *EM, seq uint64, es []E)
	get func(m *DM, dst []D) (uint64, []D, error)
}

func (l *streamLink[E, D, EM, DM]) send(seq uint64, es []E) error {
	l.put(l.out, seq, es)
	return l.st.Send(l.out)
}

func (l *streamLink[E, D, EM, DM]) recv(dst []D) (uint64, []D, error) {
	if err := l.st.RecvMsg(l.in); err != nil {
		return 0, dst, err
	}
	return l.get(l.in, dst)
}

func (l *streamLink[E, D, EM, DM]) closeSend() { _ = l.st.CloseSend() }

// kindOps builds the plugin-backed policy of one kind from a running
// plugin process.
type kindOps struct {
	open func(pc *proc, px proxyParams) (impl any, closer func(), wait func(), err error)
}

// proxyParams is what every kind's proxy needs.
type proxyParams struct {
	what         string
	o            Options
	abort        bool
	stats        *proxyStats
	onFail       func(error)
	explain      func(error) error
	setupTimeout time.Duration
}

var kinds = map[core.Kind]kindOps{
	core.KindFlowControl: kindOf(wire.Flow, flowFallback, flowStill),
	core.KindRecvBuf:     kindOf(wire.Recv, recvFallback, nil),
	core.KindSched:       kindOf(wire.Sched, schedFallback, nil),
}

// kindClient is the generated client of a kind's service.
type kindClient[IM, RM, EM, DM any] interface {
	Setup(ctx context.Context, in *IM, opts ...grpc.CallOption) (*RM, error)
	Observe(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[EM, DM], error)
}

// kindOf opens a kind's plugin-backed policy through its codec; fallback
// picks the built-in that takes over when the plugin fails, still reads
// the kind's statements of events that change nothing (nil: none).
func kindOf[I, S, E, D, IM, RM, EM, DM any](c wire.Codec[I, S, E, D, IM, RM, EM, DM],
	fallback func([]I, []S) (core.Policy[I, S, E, D], string, error), still *stillOps[E, D]) kindOps {
	return kindOps{open: func(pc *proc, pp proxyParams) (any, func(), func(), error) {
		raw, err := pc.dispense(c.Kind)
		if err != nil {
			return nil, nil, nil, err
		}
		cl, ok := raw.(kindClient[IM, RM, EM, DM])
		if !ok {
			return nil, nil, nil, fmt.Errorf("the %s client is a %T", c.Kind, raw)
		}
		setup := func(ctx context.Context, info I) (S, error) {
			var s S
			r, err := cl.Setup(ctx, c.InfoToPB(info))
			if err == nil {
				var refusal string
				if s, refusal = c.FromReply(r); refusal != "" {
					return *new(S), &refusedError{refusal}
				}
			}
			return s, err
		}
		return openKind(pp, cl.Observe, c.PutEvents, c.GetDecisions, setup, fallback, still)
	}}
}

// openKind opens the Observe stream and starts the proxy.
func openKind[I, S, E, D, EM, DM any](pp proxyParams,
	observe func(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[EM, DM], error),
	put func(*EM, uint64, []E),
	get func(*DM, []D) (uint64, []D, error),
	rpcSetup func(context.Context, I) (S, error),
	fallback func([]I, []S) (core.Policy[I, S, E, D], string, error),
	still *stillOps[E, D],
) (any, func(), func(), error) {
	l := &streamLink[E, D, EM, DM]{out: new(EM), in: new(DM), put: put, get: get}
	px := newProxy[E, D](pp.what, pp.o.Log, pp.o.Deadline, pp.abort, l, pp.stats)
	st, err := observe(px.ctx)
	if err != nil {
		px.cancel()
		return nil, nil, nil, fmt.Errorf("opening the event stream: %w", err)
	}
	l.st = st
	px.onFail, px.explain, px.stillOps = pp.onFail, pp.explain, still
	pol := newPluginPolicy(px, pp.setupTimeout, rpcSetup, fallback)
	px.run()
	return pol, pol.close, px.wait, nil
}
