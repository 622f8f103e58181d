package extoll

import (
	"fmt"

	"github.com/gobtl/gobtl/btl/extoll/simnic"
	"github.com/gobtl/gobtl/core"
)

// openSim opens the module on the simulated card (transport "sim"): the
// job runs under package sim's scheduler, whose job id the bootstrap
// reports, and every rank's device lives in this process.
func openSim(env core.BTLEnv, slots int) ([]core.Module, error) {
	p := env.Params
	if p.String("local_peers") == "exclude" {
		return nil, fmt.Errorf("extoll: local_peers = \"exclude\" leaves a node's ranks to shared memory, which the simulator does not have: on transport \"sim\" they share their card")
	}
	cfg := config(env, slots)
	dev, err := simnic.Open(simnic.Config{
		JobID: cfg.JobID, Rank: cfg.Rank, Size: cfg.Size, Name: cfg.Instance, Slots: slots,
		NodeSize: p.Int("node_size"), StallTimeout: p.Duration("stall_timeout"),
		Metrics: cfg.Metrics, Prefix: core.MetricName(Name, cfg.Instance),
	})
	if err != nil {
		return nil, fmt.Errorf("extoll: %w", err)
	}
	m, err := New(dev, cfg)
	if err != nil {
		dev.Close()
		return nil, err
	}
	// Every rank opens its device before the modex fence and connects
	// after it: by then the peers' layouts are on the fabric.
	dev.SetExtra(m.eng.Layout())
	m.peerLayout = dev.PeerExtra
	return []core.Module{m}, nil
}
