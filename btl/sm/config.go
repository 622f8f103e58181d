package sm

import (
	"fmt"
	"time"

	"github.com/gobtl/gobtl/core"
)

// How the pipeline's sender writes fragments (the copy_in parameter).
const (
	copyInCache  = "cache"
	copyInStream = "stream"
	copyInAuto   = "auto" // the faster of the two while the job runs (copyin.go)
)

// Single-copy mechanisms (the single_copy parameter).
const (
	singleCopyAuto = "auto" // CMA if the host allows it, else none
	singleCopyCMA  = "cma"  // CMA, and failing to open if it cannot work
	singleCopyNone = "none" // no RDMA: large messages use the copy pipeline
)

func powerOfTwo(v any) error {
	n := v.(int64)
	if n&(n-1) != 0 {
		return fmt.Errorf("%s is not a power of two", core.FormatSize(n))
	}
	return nil
}

// Params is the schema of the btl "sm" block.
var Params = []core.Param{
	{Name: "dir", Type: core.ParamString, Default: "/dev/shm",
		Doc: "directory of the segment files (a tmpfs); segments are named gobtl-<job>-sm.<instance>-<rank>-<random>, made exclusively, 0600, their pages reserved at start"},
	{Name: "fastbox_size", Type: core.ParamSize, Default: "64KiB", Min: "1KiB", Max: "64MiB", Check: powerOfTwo,
		Doc: "bytes of each per-sender fast-box ring in a receiver's segment (a power of two); a segment holds one per rank"},
	{Name: "fastbox_max", Type: core.ParamSize, Default: "4KiB", Max: "16MiB",
		Doc: "largest payload sent inline through a fast box; larger frames go through the FIFO in fragments"},
	core.BTLParam("eager_limit", "4KiB").WithRange("", "64MiB"),
	core.BTLParam("max_send_size", "64KiB").WithRange("1KiB", "64MiB").
		WithDoc("the largest frame payload, and so the fragment size of the copy-in/copy-out pipeline; a segment holds `fragments` of them"),
	core.BTLParam("rndv_eager_limit", "0").WithRange("", "64MiB"),
	{Name: "fragments", Type: core.ParamInt, Default: "32", Min: "2", Max: "65536",
		Doc: "send fragments in a rank's segment, shared by all destinations"},
	{Name: "copy_in", Type: core.ParamString, Default: copyInCache, Enum: []string{copyInCache, copyInStream, copyInAuto},
		Doc: "how the copy pipeline's sender writes a fragment: cache (REP MOVSB through the caches, the receiver reads from the sender's cache) or stream " +
			"(non-temporal stores to memory, the receiver reads from memory: no line is taken from the receiver's cache, which costs most when the two cores share no cache; where they share one, cache is faster — osu bw over sm.hcl on an idle 2-core VM, 10 alternating pairs: 1 MiB 13.3 against 8.0 GB/s, 64 KiB 9.9 against 6.6) or auto " +
			"(the sender times its own copies and streams while streamed ones take at most 2/3 of cached ones, caching again below 5/4, medians of 5 fragments, probing the other mode every 256-16384 fragments after writing every fragment of the segment in it once; copyin.go). auto is not the default: under load it measured no better than both (its stage times per fragment are in copyin.go)"},
	{Name: "single_copy", Type: core.ParamString, Default: singleCopyAuto,
		Enum: []string{singleCopyAuto, singleCopyCMA, singleCopyNone},
		Doc:  "single-copy mechanism for RDMA: cma (process_vm_readv/writev), none (no RDMA; the PML pipelines through fragments) or auto (cma when the host allows it)"},
	{Name: "single_copy_helper", Type: core.ParamBool, Default: "true",
		Doc: "a large CMA read goes from both ends: the receiver reads chunks from the back while the sender, when it polls, writes them from the front " +
			"(process_vm_writev); false: the receiver reads alone"},
	{Name: "single_copy_min", Type: core.ParamSize, Default: "0",
		Doc: "smallest message whose rendezvous data moves by CMA whatever else is in flight; smaller ones use the copy pipeline (Attrs.RDMAMin). " +
			"Only without mechanism blocks, which choose by size and queue depth; both 0: the mechanism table"},
	{Name: "single_copy_max", Type: core.ParamSize, Default: "0",
		Doc: "largest message whose rendezvous data moves by CMA whatever else is in flight, 0 for no limit; larger ones use the copy pipeline (Attrs.RDMAMax). " +
			"Only without mechanism blocks; both 0: the mechanism table"},
	{Name: "choose_mechanism", Type: core.ParamBool, Default: "false",
		Doc: "where the mechanism table allows CMA (single_copy_depth 0 and up), the receiver chooses CMA or the copy pipeline message by message: " +
			"the faster lately by bytes per microsecond in that power-of-two size class, the other every 1-16 ms (adapt.go); " +
			"without mechanism blocks, a message alone above 64 KiB; not on a node with more ranks than CPUs, whose default table stays; " +
			"false: the table alone decides"},
	{Name: "mechanism", Type: core.ParamBlock, Repeat: true,
		Doc: "one size range of the mechanism table (Attrs.Mech), by increasing max, the last without max: how rendezvous data of that size moves. " +
			"Without any, sm's measured default table applies (mechanism.go)",
		Block: MechParams, Check: checkMech},
	core.BTLParam("bandwidth", "20GB/s"),
	core.BTLParam("latency", "200ns"),
	core.BTLParam("exclusivity", "65000"),
	{Name: "liveness_interval", Type: core.ParamDuration, Default: "100ms", Min: "1ns",
		Doc: "how often Progress checks that connected peers are alive"},
	{Name: "close_timeout", Type: core.ParamDuration, Default: "2s", Min: "0s",
		Doc: "how long Close waits for receivers to consume fragments still in flight"},
	{Name: "node_size", Type: core.ParamInt, Default: "0", Min: "0",
		Doc: "pretend every node_size consecutive ranks are one host (experiments on one machine): sm then reaches only those; 0 uses the real host"},
}

type config struct {
	dir          string
	fboxSize     int
	fboxMax      int
	frags        int
	singleCopy   string
	helper       bool       // single_copy_helper
	stream       bool       // copy_in = "stream"
	autoCopy     bool       // copy_in = "auto"
	attrs        core.Attrs // the shared limits and performance model, RDMAMin and RDMAMax
	mechDefault  bool       // attrs.Mech is sm's default table (no mechanism blocks, no window)
	liveness     time.Duration
	closeTimeout time.Duration
	nodeSize     int
}

func configFrom(p core.Params) (config, error) {
	attrs, err := core.BTLAttrs(p)
	if err != nil {
		return config{}, fmt.Errorf("sm: %w", err)
	}
	attrs.RDMAMin, attrs.RDMAMax = p.Size("single_copy_min"), p.Size("single_copy_max")
	if attrs.Mech, err = mechTable(p, attrs.MaxSendSize); err != nil {
		return config{}, err
	}
	isDefault := len(p.Blocks("mechanism")) == 0 && attrs.Mech != nil
	if p.Bool("choose_mechanism") && attrs.Mech != nil {
		attrs.Mech = chooseIn(attrs.Mech, isDefault)
	}
	c := config{
		dir:          p.String("dir"),
		fboxSize:     int(p.Size("fastbox_size")),
		fboxMax:      int(p.Size("fastbox_max")),
		frags:        p.Int("fragments"),
		singleCopy:   p.String("single_copy"),
		helper:       p.Bool("single_copy_helper"),
		stream:       p.String("copy_in") == copyInStream,
		autoCopy:     p.String("copy_in") == copyInAuto && canStream,
		attrs:        attrs,
		liveness:     p.Duration("liveness_interval"),
		closeTimeout: p.Duration("close_timeout"),
		nodeSize:     p.Int("node_size"),
		mechDefault:  isDefault,
	}
	// A fast-box slot must leave room for the reserve line and for a wrap.
	if lim := c.fboxSize/2 - cacheLine - slotHdr - core.HeaderSize; c.fboxMax > lim {
		return c, fmt.Errorf("sm: fastbox_max %s does not fit twice in a %s fast box (at most %s)",
			core.FormatSize(int64(c.fboxMax)), core.FormatSize(int64(c.fboxSize)), core.FormatSize(int64(lim)))
	}
	if a := c.attrs; a.RDMAMax > 0 && a.RDMAMin > a.RDMAMax {
		return c, fmt.Errorf("sm: single_copy_min %s exceeds single_copy_max %s",
			core.FormatSize(a.RDMAMin), core.FormatSize(a.RDMAMax))
	}
	return c, nil
}
