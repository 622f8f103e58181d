// Package perpeer is the per-peer receive-buffer policy: every peer gets
// its own queues of N buffers of size S, kept full by credit flow control
// (Open MPI 1.2's default, the baseline of seed 002 §4: per-peer 4 KiB and
// 32 KiB buffers, eight of each). It never grows anything: the receive
// memory it registers is peers × Σ N·S, whatever the traffic.
package perpeer

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/recvbuf"
)

// Default is Open MPI 1.2's per-peer layout: 8 buffers of 4 KiB and 8 of
// 32 KiB per peer, credits returned after 4.
const Default = "P,4096,8,6,4:P,32768,8,6,4"

// Params is the schema of policy "recvbuf" "perpeer".
var Params = []core.Param{
	recvbuf.QueuesParam(Default, "per-peer queues (P only)"),
	recvbuf.SendFreeListMaxParam,
}

// New builds the policy from its parameters.
func New(p core.Params) (*recvbuf.Fixed, error) {
	qs, err := recvbuf.ParseReceiveQueues(p.String("receive_queues"))
	if err != nil {
		return nil, fmt.Errorf("recvbuf perpeer: %w", err)
	}
	for i, q := range qs {
		if q.Kind != core.QueuePerPeer {
			return nil, fmt.Errorf("recvbuf perpeer: queue %d is shared; use the srq policy for S queues", i+1)
		}
	}
	// Nothing grows: per-peer queues are kept full by credits.
	return &recvbuf.Fixed{Name: "recvbuf perpeer", Queues: qs, SendFreeListMax: p.Int("send_free_list_max")}, nil
}

func init() {
	recvbuf.Register("perpeer", "per-peer receive queues under credit flow control (Open MPI 1.2's default: 8×4KiB and 8×32KiB per peer)",
		Params, New)
}
