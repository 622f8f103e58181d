package sm

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Single-copy mechanisms (the single_copy parameter).
const (
	singleCopyAuto = "auto" // CMA if the host allows it, else none
	singleCopyCMA  = "cma"  // CMA, and failing to open if it cannot work
	singleCopyNone = "none" // no RDMA: large messages use the copy pipeline
)

func sizeIn(lo, hi int64) func(any) error {
	return func(v any) error {
		n := v.(int64)
		if n < lo || n > hi {
			return fmt.Errorf("%s is outside [%s, %s]", core.FormatSize(n), core.FormatSize(lo), core.FormatSize(hi))
		}
		return nil
	}
}

func powerOfTwo(v any) error {
	n := v.(int64)
	if n&(n-1) != 0 {
		return fmt.Errorf("%s is not a power of two", core.FormatSize(n))
	}
	return nil
}

func both(fs ...func(any) error) func(any) error {
	return func(v any) error {
		for _, f := range fs {
			if err := f(v); err != nil {
				return err
			}
		}
		return nil
	}
}

// Params is the schema of the btl "sm" block.
var Params = []core.Param{
	{Name: "dir", Type: core.ParamString, Default: "/dev/shm",
		Doc: "directory of the segment files (a tmpfs); segments are named gobtl-<job>-sm.<instance>-<rank>"},
	{Name: "fastbox_size", Type: core.ParamSize, Default: "64KiB",
		Doc:   "bytes of each per-sender fast-box ring in a receiver's segment (a power of two); a segment holds one per rank",
		Check: both(sizeIn(1<<10, 64<<20), powerOfTwo)},
	{Name: "fastbox_max", Type: core.ParamSize, Default: "4KiB",
		Doc:   "largest payload sent inline through a fast box; larger frames go through the FIFO in fragments",
		Check: sizeIn(0, 16<<20)},
	{Name: "eager_limit", Type: core.ParamSize, Default: "4KiB",
		Doc:   "largest message, in user bytes, sent eagerly",
		Check: sizeIn(0, 64<<20)},
	{Name: "max_send_size", Type: core.ParamSize, Default: "32KiB",
		Doc:   "largest payload of one frame: the fragment size of the copy-in/copy-out pipeline",
		Check: sizeIn(1<<10, 64<<20)},
	{Name: "rndv_eager_limit", Type: core.ParamSize, Default: "0",
		Doc:   "user bytes carried inline in a rendezvous start",
		Check: sizeIn(0, 64<<20)},
	{Name: "fragments", Type: core.ParamInt, Default: "64",
		Doc: "send fragments in a rank's segment, shared by all destinations",
		Check: func(v any) error {
			if n := v.(int64); n < 2 || n > 1<<16 {
				return fmt.Errorf("%d is outside [2, 65536]", n)
			}
			return nil
		}},
	{Name: "single_copy", Type: core.ParamString, Default: singleCopyAuto,
		Enum: []string{singleCopyAuto, singleCopyCMA, singleCopyNone},
		Doc:  "single-copy mechanism for RDMA: cma (process_vm_readv/writev), none (no RDMA; the PML pipelines through fragments) or auto (cma when the host allows it)"},
	{Name: "single_copy_min", Type: core.ParamSize, Default: "0",
		Doc: "smallest message whose rendezvous data moves by CMA; smaller ones use the copy pipeline (Attrs.RDMAMin)"},
	{Name: "single_copy_max", Type: core.ParamSize, Default: "0",
		Doc: "largest message whose rendezvous data moves by CMA, 0 for no limit; larger ones use the copy pipeline, " +
			"which with both processes copying can beat one process's single copy (Attrs.RDMAMax)"},
	{Name: "bandwidth", Type: core.ParamRate, Default: "20GB/s",
		Doc: "bandwidth the PML's scheduler assumes for this module"},
	{Name: "latency", Type: core.ParamDuration, Default: "200ns",
		Doc: "one-way small-message latency the PML assumes for this module"},
	{Name: "exclusivity", Type: core.ParamInt, Default: "65000",
		Doc: "rank against other modules reaching the same peer (self is higher, networks lower)"},
	{Name: "liveness_interval", Type: core.ParamDuration, Default: "100ms",
		Doc: "how often Progress checks that connected peers are alive"},
	{Name: "close_timeout", Type: core.ParamDuration, Default: "2s",
		Doc: "how long Close waits for receivers to consume fragments still in flight"},
	{Name: "node_size", Type: core.ParamInt, Default: "0",
		Check: func(v any) error {
			if v.(int64) < 0 {
				return fmt.Errorf("must not be negative")
			}
			return nil
		},
		Doc: "pretend every node_size consecutive ranks are one host (experiments on one machine): sm then reaches only those; 0 uses the real host"},
}

type config struct {
	dir          string
	fboxSize     int
	fboxMax      int
	eagerLimit   int
	maxSend      int
	rndvEager    int
	frags        int
	singleCopy   string
	rdmaMin      int64
	rdmaMax      int64
	bandwidth    float64
	latency      time.Duration
	exclusivity  int
	liveness     time.Duration
	closeTimeout time.Duration
	nodeSize     int
}

func configFrom(p core.Params) (config, error) {
	c := config{
		dir:          p.String("dir"),
		fboxSize:     int(p.Size("fastbox_size")),
		fboxMax:      int(p.Size("fastbox_max")),
		eagerLimit:   int(p.Size("eager_limit")),
		maxSend:      int(p.Size("max_send_size")),
		rndvEager:    int(p.Size("rndv_eager_limit")),
		frags:        p.Int("fragments"),
		singleCopy:   p.String("single_copy"),
		rdmaMin:      p.Size("single_copy_min"),
		rdmaMax:      p.Size("single_copy_max"),
		bandwidth:    p.Rate("bandwidth"),
		latency:      p.Duration("latency"),
		exclusivity:  p.Int("exclusivity"),
		liveness:     p.Duration("liveness_interval"),
		closeTimeout: p.Duration("close_timeout"),
		nodeSize:     p.Int("node_size"),
	}
	// A fast-box slot must leave room for the reserve line and for a wrap.
	if lim := c.fboxSize/2 - cacheLine - slotHdr - core.HeaderSize; c.fboxMax > lim {
		return c, fmt.Errorf("sm: fastbox_max %s does not fit twice in a %s fast box (at most %s)",
			core.FormatSize(int64(c.fboxMax)), core.FormatSize(int64(c.fboxSize)), core.FormatSize(int64(lim)))
	}
	if c.eagerLimit > c.maxSend {
		return c, fmt.Errorf("sm: eager_limit %s exceeds max_send_size %s",
			core.FormatSize(int64(c.eagerLimit)), core.FormatSize(int64(c.maxSend)))
	}
	if c.rndvEager > c.maxSend {
		return c, fmt.Errorf("sm: rndv_eager_limit %s exceeds max_send_size %s",
			core.FormatSize(int64(c.rndvEager)), core.FormatSize(int64(c.maxSend)))
	}
	if c.rdmaMax > 0 && c.rdmaMin > c.rdmaMax {
		return c, fmt.Errorf("sm: single_copy_min %s exceeds single_copy_max %s",
			core.FormatSize(c.rdmaMin), core.FormatSize(c.rdmaMax))
	}
	if c.liveness <= 0 || c.closeTimeout < 0 {
		return c, fmt.Errorf("sm: liveness_interval must be positive and close_timeout not negative")
	}
	return c, nil
}
