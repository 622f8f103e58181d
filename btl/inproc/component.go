package inproc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/gobtl/gobtl/core"
)

// Params is the HCL schema of btl "inproc": each block is one rail of the
// fabric the ranks of this process share.
var Params = []core.Param{
	core.BTLParam("eager_limit", "4KiB"),
	core.BTLParam("max_send_size", "16KiB"),
	core.BTLParam("rndv_eager_limit", "1KiB"),
	{Name: "slots", Type: core.ParamInt, Default: "64", Doc: "ring slots per link and direction"},
	core.BTLParam("max_reads", "16"),
	{Name: "rdma", Type: core.ParamBool, Default: "true", Doc: "offer put/get; false makes the PML use its send pipeline"},
	{Name: "delay", Type: core.ParamDuration, Default: "0s", Doc: "extra delivery delay on every link of the rail"},
	{Name: "jitter", Type: core.ParamDuration, Default: "0s", Doc: "random extra delay per frame, reordering frames across rails"},
	core.BTLParam("bandwidth", "5GB/s"),
}

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: "inproc", Params: Params,
		Doc:     "In-process fabric: ranks that are goroutines of one process (gobtl.RunLocal, tests). Each block is one rail.",
		OpenBTL: open, Reach: core.ReachProcess,
	})
}

// jobs holds the fabric of every job whose ranks have opened btl "inproc"
// in this process, by job id: ranks that are goroutines find each other
// here, as the processes of a host find a shared-memory segment by name.
// An entry goes when the last of its modules closes.
var jobs = struct {
	sync.Mutex
	m map[string]*job
}{m: map[string]*job{}}

type job struct {
	f    *Fabric
	open int // modules opened through the component and not yet closed
}

// process is this process's address: what a rank publishes, and what a
// peer must have published too to be reachable. The random part tells
// apart processes of equal pid on different hosts.
var process = []byte(fmt.Sprintf("%d-%016x", os.Getpid(), rand.Uint64()))

// open joins this rank to its job's fabric (creating it for the first
// rank of the job in this process), adds the block's rail and publishes
// this process's address, so that peers in other processes are reported
// unreachable instead of being waited for.
func open(env core.BTLEnv) ([]core.Module, error) {
	p := env.Params
	a, err := core.BTLAttrs(p)
	if err != nil {
		return nil, fmt.Errorf("inproc: %w", err)
	}
	if a.RndvEagerLimit == 0 {
		a.RndvEagerLimit = -1 // none; RailOptions' zero is the default
	}
	b := env.Boot
	f, release, err := fabricOf(b, env.Clock)
	if err != nil {
		return nil, err
	}
	rank := b.Rank()
	i := f.Rail(env.Instance, RailOptions{
		EagerLimit: a.EagerLimit, MaxSendSize: a.MaxSendSize, RndvEagerLimit: a.RndvEagerLimit,
		Slots: p.Int("slots"), MaxReads: a.MaxReads, NoRDMA: !p.Bool("rdma"), Bandwidth: a.Bandwidth,
	})
	if d := p.Duration("delay"); d > 0 {
		for a := 0; a < f.n; a++ {
			if a != rank {
				f.Delay(i, rank, a, d, false)
			}
		}
	}
	if j := p.Duration("jitter"); j > 0 {
		f.Jitter(i, j)
	}
	m := f.Module(rank, i)
	key := "btl.inproc." + env.Instance
	if err := b.Put(key, process); err != nil {
		release()
		return nil, fmt.Errorf("inproc: publish address: %w", err)
	}
	m.join(b, key, release)
	if env.Metrics != nil {
		m.setMetrics(env.Metrics)
	}
	return []core.Module{m}, nil
}

// fabricOf returns the fabric of b's job, and the function that gives
// this rank's hold on it back.
func fabricOf(b core.Bootstrap, clock core.Clock) (*Fabric, func(), error) {
	jobs.Lock()
	defer jobs.Unlock()
	id := b.JobID()
	j := jobs.m[id]
	if j == nil {
		j = &job{f: New(b.Size(), clock)}
		jobs.m[id] = j
	}
	if j.f.n != b.Size() {
		return nil, nil, fmt.Errorf("inproc: job %q has %d ranks in this process's fabric, but this rank's bootstrap says %d", id, j.f.n, b.Size())
	}
	j.open++
	var once sync.Once
	return j.f, func() {
		once.Do(func() {
			jobs.Lock()
			defer jobs.Unlock()
			if j.open--; j.open == 0 && jobs.m[id] == j {
				delete(jobs.m, id)
			}
		})
	}, nil
}

// reachable reports whether peer published this process's address: only
// ranks of this process share the fabric. It is asked once per peer, after
// the fence that follows open.
func (m *Module) reachable(peer int) error {
	addr, err := m.boot.Get(context.Background(), peer, m.bootKey)
	if err != nil {
		return fmt.Errorf("inproc: rank %d published no address: %v: %w", peer, err, core.ErrUnreachable)
	}
	if !bytes.Equal(addr, process) {
		return fmt.Errorf("inproc: rank %d is in another process (ranks must be goroutines of one, as under gobtl.RunLocal): %w", peer, core.ErrUnreachable)
	}
	return nil
}
