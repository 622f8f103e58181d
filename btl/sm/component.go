package sm

import "github.com/gobtl/gobtl/core"

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL,
		Name: "sm",
		Doc: "Shared memory between the ranks of one host: per-pair fast boxes for small frames, " +
			"a multi-producer FIFO of fragments for the rest, and single-copy RDMA by cross-memory " +
			"attach (process_vm_readv/writev) where the host allows it.",
		Params:  Params,
		OpenBTL: Open,
		Reach:   core.ReachHost,
	})
}

// Open creates this rank's segment and publishes its address through the
// bootstrap; peers connect after the next fence. It returns one module.
func Open(env core.BTLEnv) ([]core.Module, error) {
	p := env.Params
	if p.Schema() == nil {
		p = core.MustParams(Params)
	}
	cfg, err := configFrom(p)
	if err != nil {
		return nil, err
	}
	m, err := newModule(env, cfg)
	if err != nil {
		return nil, err
	}
	return []core.Module{m}, nil
}
