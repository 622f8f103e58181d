package ib

import "github.com/gobtl/gobtl/core"

func init() {
	core.Register(&core.Component{
		Kind: core.KindBTL, Name: "ib",
		Doc: "InfiniBand RC over a verbs interface: softrc (software HCA over TCP) or rdma-core; " +
			"eager sends through registered buffers on per-peer/SRQ/B-SRQ receive queues, RDMA write and read, " +
			"solicited events, connections on first use",
		Params:  Params,
		OpenBTL: open,
	})
}
