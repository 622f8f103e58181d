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
	{Name: "eager_limit", Type: core.ParamSize, Default: "4KiB", Doc: "largest message sent eagerly"},
	{Name: "max_send_size", Type: core.ParamSize, Default: "16KiB", Doc: "largest frame payload"},
	{Name: "rndv_eager_limit", Type: core.ParamSize, Default: "1KiB", Doc: "bytes sent inline with a rendezvous start"},
	{Name: "slots", Type: core.ParamInt, Default: "64", Doc: "ring slots per link and direction"},
	{Name: "max_reads", Type: core.ParamInt, Default: "16", Doc: "outstanding RDMA reads per endpoint"},
	{Name: "rdma", Type: core.ParamBool, Default: "true", Doc: "offer put/get; false makes the PML use its send pipeline"},
	{Name: "delay", Type: core.ParamDuration, Default: "0s", Doc: "extra delivery delay on every link of the rail"},
	{Name: "jitter", Type: core.ParamDuration, Default: "0s", Doc: "random extra delay per frame, reordering frames across rails"},
	{Name: "bandwidth", Type: core.ParamRate, Default: "5GB/s", Doc: "bandwidth the module reports to the scheduler"},
}

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: "inproc", Params: Params,
		Doc:     "In-process fabric: ranks that are goroutines of one process (gobtl.RunLocal, tests). Each block is one rail.",
		OpenBTL: open,
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
	b := env.Boot
	f, release, err := fabricOf(b, env.Clock)
	if err != nil {
		return nil, err
	}
	p := env.Params
	inline := int(p.Size("rndv_eager_limit"))
	if inline == 0 {
		inline = -1
	}
	rank := b.Rank()
	i := f.Rail(env.Instance, RailOptions{
		EagerLimit: int(p.Size("eager_limit")), MaxSendSize: int(p.Size("max_send_size")),
		RndvEagerLimit: inline, Slots: p.Int("slots"), MaxReads: p.Int("max_reads"),
		NoRDMA: !p.Bool("rdma"), Bandwidth: p.Rate("bandwidth"),
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
