// Package srq is the shared-receive-queue policy: one shared receive queue
// per buffer size for all peers, started small and grown when the SRQ's
// limit event says it ran low (Open MPI's openib with "S" queues). It
// accepts any receive_queues layout; per-peer ("P") queues in it stay as
// configured, shared ones grow.
package srq

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/recvbuf"
)

// Default is Open MPI's default layout (a per-peer queue for small and
// control frames, shared queues of 2 KiB, 16 KiB and 64 KiB), with fewer
// buffers so that many ranks fit on one host.
const Default = "P,128,256,192,128:S,2048,256,240,32:S,16384,128,120,16:S,65536,32,30,8"

// Params is the schema of policy "recvbuf" "srq".
var Params = []core.Param{
	recvbuf.QueuesParam(Default, "queues"),
	recvbuf.MaxFactorParam,
	recvbuf.GrowParam,
	recvbuf.SendFreeListMaxParam,
}

// New builds the policy from its parameters.
func New(p core.Params) (*recvbuf.Fixed, error) {
	qs, err := recvbuf.ParseReceiveQueues(p.String("receive_queues"))
	if err != nil {
		return nil, fmt.Errorf("recvbuf srq: %w", err)
	}
	return NewFromQueues(qs, p.Int("max_factor"), p.Float("grow"), p.Int("send_free_list_max"))
}

// NewFromQueues builds the policy for a parsed layout: shared queues
// without a Max may grow to maxFactor times their initial buffers.
func NewFromQueues(qs []core.QueueSpec, maxFactor int, grow float64, sfl int) (*recvbuf.Fixed, error) {
	if maxFactor < 1 || grow < 0 || sfl < 1 {
		return nil, fmt.Errorf("recvbuf srq: max_factor %d (≥1), grow %v (≥0), send_free_list_max %d (≥1)", maxFactor, grow, sfl)
	}
	qs = append([]core.QueueSpec(nil), qs...)
	for i := range qs {
		if qs[i].Kind == core.QueueShared && qs[i].Max == 0 {
			qs[i].Max = qs[i].Count * maxFactor
		}
	}
	return &recvbuf.Fixed{Name: "recvbuf srq", Queues: qs, Grow: grow, SendFreeListMax: sfl}, nil
}

func init() {
	recvbuf.Register("srq", "shared receive queues per buffer size, grown on the SRQ-limit event (Open MPI receive_queues syntax)",
		Params, New)
}
