package extoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	xbtl "github.com/gobtl/gobtl/btl/extoll"
	"github.com/gobtl/gobtl/btl/extoll/softnic"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/pml"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	extollstatic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_static"
	"github.com/gobtl/gobtl/policies/flowcontrol/none"
)

// Stack is the EXTOLL configuration of one run.
type Stack struct {
	// Scheme is "none", "extoll_static" or "extoll_dynamic".
	Scheme       string `json:"scheme"`
	SlotsPerPeer int    `json:"slots_per_peer"`
	CreditSlots  int    `json:"credit_slots"`
	Piggyback    bool   `json:"piggyback"`
	// StallTimeout bounds a send blocked on a full mailbox (scheme none).
	StallTimeout time.Duration `json:"stall_timeout,omitempty"`
	// NodeSize > 0 pretends every NodeSize ranks are a node whose ranks talk
	// over btl/sm and use no EXTOLL credits (seed 003 §7.2); processes only.
	NodeSize int `json:"node_size,omitempty"`
	// Choose renders the lines of the policy block that choose the policy
	// by name (experiment.Env.PolicyLines); nil: built in.
	Choose func(name string) string `json:"-"`
	// Open opens the policy for a rank in this process (a plugin); nil:
	// the built-in.
	Open func() (core.FlowControl, io.Closer, error) `json:"-"`
}

// Reference is the paper's baseline: no flow control and a mailbox no
// pattern here can fill.
func Reference() Stack { return Stack{Scheme: "none", SlotsPerPeer: 1024} }

func (s Stack) String() string {
	if s.Scheme == "none" {
		return fmt.Sprintf("none/%d slots", s.SlotsPerPeer)
	}
	nodes := ""
	if s.NodeSize > 0 {
		nodes = fmt.Sprintf("/nodes of %d", s.NodeSize)
	}
	pb := ""
	if s.Piggyback {
		pb = "+pb"
	}
	return fmt.Sprintf("%s/%d slots/k=%d%s%s", strings.TrimPrefix(s.Scheme, "extoll_"), s.SlotsPerPeer, s.CreditSlots, pb, nodes)
}

// nodes is the EXTOLL block's lines for simulated nodes, and the sm block.
func (s Stack) nodes() string {
	if s.NodeSize <= 0 {
		return ""
	}
	return fmt.Sprintf("  node_size      = %d\n  local_peers    = \"exclude\"\n}\n\nbtl \"sm\" \"sm\" {\n  node_size = %d\n", s.NodeSize, s.NodeSize)
}

func (s Stack) stall() time.Duration {
	if s.StallTimeout > 0 {
		return s.StallTimeout
	}
	return 60 * time.Second
}

func (s Stack) policy() (core.FlowControl, error) {
	switch s.Scheme {
	case "none":
		return none.Policy{}, nil
	case "extoll_static":
		return &extollstatic.Policy{CreditSlots: s.CreditSlots}, nil
	case "extoll_dynamic":
		return &extolldynamic.Policy{CreditSlots: s.CreditSlots}, nil
	}
	return nil, fmt.Errorf("unknown scheme %q", s.Scheme)
}

// params are the policy block's parameters, as the policy's schema
// decodes them.
func (s Stack) params() core.Params {
	c, ok := core.Lookup(core.KindFlowControl, s.Scheme)
	if !ok {
		return core.Params{}
	}
	p := core.MustParams(c.Params)
	if s.Scheme != "none" {
		p.SetText("credit_slots", fmt.Sprint(s.CreditSlots))
	}
	return p
}

// HCL is the stack file for a run under `gobtl run`.
func (s Stack) HCL() string {
	choose := s.Choose
	if choose == nil {
		choose = func(name string) string { return fmt.Sprintf("  builtin = %q\n", name) }
	}
	pol := "policy \"flow_control\" {\n" + choose(s.Scheme)
	if s.Scheme != "none" {
		pol += fmt.Sprintf("  credit_slots = %d\n", s.CreditSlots)
	}
	pol += "}\n"
	return fmt.Sprintf(`job {
  protocol = "rdma_read"
  progress {
    spin      = %d
    yield     = %d
    sleep     = %q
    max_sleep = %q
  }
}

btl "self" "self" {}

btl "extoll" "x" {
  slots_per_peer = %d
  piggyback      = %v
  stall_timeout  = %q
%s}

%s`, backoff.Spin, backoff.Yield, backoff.Sleep.String(), backoff.MaxSleep.String(), s.SlotsPerPeer, s.Piggyback, s.stall().String(), s.nodes(), pol)
}

// InProcess runs spec on n ranks that are goroutines of this process, each
// with its own EXTOLL module (mailbox in /dev/shm) and pml communicator.
func InProcess(n int, st Stack, spec Spec) (*Outcome, error) {
	if st.NodeSize > 0 {
		return nil, errors.New("simulated nodes need btl/sm between processes; run under gobtl run")
	}
	j := &inProcessJob{n: n, st: st, addrs: addrBook{addrs: map[int]softnic.Addr{}}}
	defer j.closePolicies()
	if err := j.openModules(); err != nil {
		return nil, err
	}
	if err := j.openComms(); err != nil {
		return nil, err
	}
	defer j.closeComms()
	return j.run(spec)
}

// addrBook is where the in-process ranks find each other's mailboxes: a
// rank's address is there once its module is open.
type addrBook struct {
	mu    sync.Mutex
	addrs map[int]softnic.Addr
}

func (b *addrBook) set(r int, a softnic.Addr) {
	b.mu.Lock()
	b.addrs[r] = a
	b.mu.Unlock()
}

// resolve waits until rank r's address is known, or ctx ends.
func (b *addrBook) resolve(ctx context.Context, r int) (softnic.Addr, error) {
	for {
		b.mu.Lock()
		a, ok := b.addrs[r]
		b.mu.Unlock()
		if ok {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return softnic.Addr{}, ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// inProcessJob is an in-process run's n ranks: their EXTOLL modules,
// metrics and communicators, and the policy plugins opened for them.
type inProcessJob struct {
	n       int
	st      Stack
	addrs   addrBook
	mods    []*xbtl.Module
	reg     []*core.Metrics
	comms   []*pml.Comm
	plugins []io.Closer
}

// openModules opens every rank's EXTOLL module, with its own flow-control
// policy (a plugin's when st.Open says so), under one job key: the ranks
// are this process's, so no exchange is needed.
func (j *inProcessJob) openModules() error {
	st, n := j.st, j.n
	job := fmt.Sprintf("exp%d-%d", os.Getpid(), time.Now().UnixNano())
	key := core.NewJobKey()
	j.mods, j.reg = make([]*xbtl.Module, n), make([]*core.Metrics, n)
	for r := range n {
		pol, err := st.policy()
		if err != nil {
			return err
		}
		if st.Open != nil {
			p, c, err := st.Open()
			if err != nil {
				return err
			}
			j.plugins = append(j.plugins, c)
			pol = p
		}
		j.reg[r] = core.NewMetrics()
		m, addr, err := xbtl.Open(xbtl.Config{
			Rank: r, Size: n, JobID: job, Instance: "x", Slots: st.SlotsPerPeer * n, Policy: pol, Piggyback: st.Piggyback, Metrics: j.reg[r],
			Device: softnic.Config{StallTimeout: st.stall(), Resolve: j.addrs.resolve, Key: key},
		})
		if err != nil {
			return err
		}
		j.addrs.set(r, addr)
		j.mods[r] = m
	}
	return nil
}

// openComms puts a pml communicator on each rank's module. A job-wide
// stall bound ends ranks blocked in receives when the run without flow
// control stalls (their senders fail first).
func (j *inProcessJob) openComms() error {
	j.comms = make([]*pml.Comm, j.n)
	for r, m := range j.mods {
		c, err := pml.New(r, j.n, []core.Module{m}, pml.Options{Metrics: j.reg[r], StallTimeout: 2 * j.st.stall(), Backoff: backoff})
		if err != nil {
			return err
		}
		j.comms[r] = c
	}
	return nil
}

// closeComms closes the communicators together, Close finalizing
// collectively. (Ranks close on their own when they finish; this is for
// runs that failed.)
func (j *inProcessJob) closeComms() {
	var wg sync.WaitGroup
	for _, c := range j.comms {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

// closePolicies closes the policy plugins, the last opened first.
func (j *inProcessJob) closePolicies() {
	for _, c := range slices.Backward(j.plugins) {
		c.Close()
	}
}

// run runs spec on every rank at once and returns the outcome a rank
// reported (rank 0's), or every rank's error.
func (j *inProcessJob) run(spec Spec) (*Outcome, error) {
	outs := make(chan *Outcome, j.n)
	errs0 := make(chan error, j.n)
	for _, c := range j.comms {
		go func() {
			o, err := Run(c, spec)
			// Close at once, as a process would exit: it drains what still
			// waits for credits while the others progress. (A rank that
			// just stopped progressing would strand those packets.)
			c.Close()
			if err != nil {
				errs0 <- fmt.Errorf("rank %d: %w", c.Rank(), err)
				return
			}
			outs <- o
		}()
	}
	var res *Outcome
	var errs []error
	for range j.n {
		select {
		case err := <-errs0:
			errs = append(errs, err)
		case o := <-outs:
			if o != nil {
				res = o
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return res, nil
}

// backoff is how waiting ranks poll in the experiments: ranks outnumber
// the cores, so a waiter gives its core away almost at once (the stack
// file's progress block says the same for runs under gobtl run).
var backoff = pml.Backoff{Spin: 20, Yield: 20, Sleep: 20 * time.Microsecond, MaxSleep: 200 * time.Microsecond}
