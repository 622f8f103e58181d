// Package bsrq is the Bucket SRQ receive-buffer policy of seed 002 §3
// (Shipman et al., "Investigations on InfiniBand: Efficient Network Buffer
// Utilization at Scale"): per-peer "tiny" buffers (128 bytes plus the
// header) under simple credit flow control, so that small control frames
// always find a buffer, plus one registered slab divided equally into N
// buckets; bucket i holds buffers of R_i = 2^(8+i) bytes, i ∈ [0, N), and
// is its own shared receive queue (and, in the BTL, its own QP per peer,
// since a QP feeds exactly one receive queue). A sender puts each frame in
// the smallest buffer that holds it, from send free lists that grow on
// demand up to a limit. Frames on the bucket path carry no flow-control
// overhead; the RNR NAK with infinite retry guards them, and a bucket
// grows when its SRQ-limit event fires.
package bsrq

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/recvbuf"
)

// Params is the schema of policy "recvbuf" "bsrq".
var Params = []core.Param{
	{Name: "tiny", Type: core.ParamSize, Default: "128B",
		Doc: "payload bytes of the per-peer tiny buffers (the header comes on top)"},
	{Name: "tiny_count", Type: core.ParamInt, Default: "32", Doc: "tiny buffers per peer"},
	{Name: "tiny_credit_window", Type: core.ParamInt, Default: "16",
		Doc: "explicit credits go back once this many tiny buffers are owed"},
	{Name: "slab", Type: core.ParamSize, Default: "4MiB",
		Doc: "registered receive memory for the buckets, divided equally among them"},
	{Name: "buckets", Type: core.ParamInt, Default: "8", Doc: "buckets of 2^8, 2^9, ... bytes"},
	{Name: "min_bucket", Type: core.ParamSize, Default: "256B", Doc: "buffer size of the smallest bucket (a power of two)"},
	{Name: "limit", Type: core.ParamFloat, Default: "0.25",
		Doc: "a bucket's srq_limit, as a fraction of its initial buffers"},
	recvbuf.MaxFactorParam,
	recvbuf.GrowParam,
	recvbuf.SendFreeListMaxParam,
}

// New builds the policy from its parameters.
func New(p core.Params) (*recvbuf.Fixed, error) {
	return NewLayout(Layout{
		Tiny: int(p.Size("tiny")), TinyCount: p.Int("tiny_count"), TinyWindow: p.Int("tiny_credit_window"),
		Slab: p.Size("slab"), Buckets: p.Int("buckets"), MinBucket: int(p.Size("min_bucket")),
		Limit: p.Float("limit"), MaxFactor: p.Int("max_factor"), Grow: p.Float("grow"),
		SendFreeListMax: p.Int("send_free_list_max"),
	})
}

// Layout are B-SRQ's parameters.
type Layout struct {
	Tiny, TinyCount, TinyWindow int
	Slab                        int64
	Buckets, MinBucket          int
	Limit                       float64
	MaxFactor                   int
	Grow                        float64
	SendFreeListMax             int
}

// NewLayout builds the policy for a layout.
func NewLayout(l Layout) (*recvbuf.Fixed, error) {
	switch {
	case l.Tiny < 8 || l.TinyCount < 1 || l.TinyWindow < 1 || l.TinyWindow > l.TinyCount:
		return nil, fmt.Errorf("recvbuf bsrq: tiny %d B × %d, window %d: want ≥8 B, ≥1 buffer, window in [1, count]", l.Tiny, l.TinyCount, l.TinyWindow)
	case l.Buckets < 1 || l.Buckets > 24:
		return nil, fmt.Errorf("recvbuf bsrq: %d buckets, want 1..24", l.Buckets)
	case l.MinBucket < 64 || l.MinBucket&(l.MinBucket-1) != 0:
		return nil, fmt.Errorf("recvbuf bsrq: min_bucket %d is not a power of two ≥ 64", l.MinBucket)
	case l.MinBucket <= l.Tiny+core.HeaderSize:
		return nil, fmt.Errorf("recvbuf bsrq: min_bucket %d does not exceed a tiny buffer (%d)", l.MinBucket, l.Tiny+core.HeaderSize)
	case l.Limit < 0 || l.Limit >= 1 || l.MaxFactor < 1 || l.Grow < 0 || l.SendFreeListMax < 1:
		return nil, fmt.Errorf("recvbuf bsrq: limit %v (in [0,1)), max_factor %d (≥1), grow %v (≥0), send_free_list_max %d (≥1)", l.Limit, l.MaxFactor, l.Grow, l.SendFreeListMax)
	}
	qs := []core.QueueSpec{{Kind: core.QueuePerPeer, BufSize: l.Tiny + core.HeaderSize, Count: l.TinyCount, Low: l.TinyWindow}}
	per := l.Slab / int64(l.Buckets) // S_i = S_j: the slab is divided equally
	for i := 0; i < l.Buckets; i++ {
		r := l.MinBucket << i // R_i = 2^(8+i) for the paper's min_bucket 256
		n := int(per / int64(r))
		if n < 1 {
			return nil, fmt.Errorf("recvbuf bsrq: a %d-byte slab share holds no %d-byte buffer (bucket %d)", per, r, i)
		}
		qs = append(qs, core.QueueSpec{Kind: core.QueueShared, BufSize: r, Count: n, Low: int(float64(n) * l.Limit), Max: n * l.MaxFactor})
	}
	return &recvbuf.Fixed{Name: "recvbuf bsrq", Queues: qs, Grow: l.Grow, SendFreeListMax: l.SendFreeListMax}, nil
}

func init() {
	recvbuf.Register("bsrq", "Bucket SRQ (seed 002): per-peer tiny buffers under credits plus power-of-two buckets, each a shared receive queue",
		Params, New)
}
