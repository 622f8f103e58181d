package inproc

import (
	"fmt"

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

func open(env core.BTLEnv) ([]core.Module, error) {
	b, ok := env.Boot.(*Boot)
	if !ok {
		return nil, fmt.Errorf("inproc: btl %q needs ranks in one process (gobtl.RunLocal); this job's bootstrap is %T", env.Instance, env.Boot)
	}
	p := env.Params
	inline := int(p.Size("rndv_eager_limit"))
	if inline == 0 {
		inline = -1
	}
	f := b.f
	i := f.Rail(env.Instance, RailOptions{
		EagerLimit: int(p.Size("eager_limit")), MaxSendSize: int(p.Size("max_send_size")),
		RndvEagerLimit: inline, Slots: p.Int("slots"), MaxReads: p.Int("max_reads"),
		NoRDMA: !p.Bool("rdma"), Bandwidth: p.Rate("bandwidth"),
	})
	if d := p.Duration("delay"); d > 0 {
		for a := 0; a < f.n; a++ {
			if a != b.rank {
				f.Delay(i, b.rank, a, d, false)
			}
		}
	}
	if j := p.Duration("jitter"); j > 0 {
		f.Jitter(i, j)
	}
	m := f.Module(b.rank, i)
	if env.Metrics != nil {
		m.setMetrics(env.Metrics)
	}
	return []core.Module{m}, nil
}
