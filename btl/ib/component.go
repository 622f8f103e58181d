package ib

import "github.com/gobtl/gobtl/core"

// DefaultRecvBuffers is the receive-buffer policy a job without a recvbuf
// policy runs: Open MPI's default layout of shared queues, grown on the
// SRQ-limit event. The block's receive_queues, if set, is its layout.
const DefaultRecvBuffers = "srq"

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: "ib",
		Doc: "InfiniBand RC over a verbs interface: softrc (software HCA over TCP) or rdma-core; " +
			"eager sends through registered buffers on per-peer/SRQ/B-SRQ receive queues, RDMA write and read, " +
			"solicited events, connections on first use",
		Params:   Params,
		OpenBTL:  open,
		Defaults: map[core.Kind]string{core.KindRecvBuf: DefaultRecvBuffers},
		Reach:    core.ReachNetwork,
	})
}
