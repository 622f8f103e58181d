package conf

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Protocol is the rendezvous protocol a job uses for messages above the
// eager limit (seed 004).
type Protocol string

// The rendezvous protocols.
const (
	// ProtocolRDMARead: START carries the sender's key, the receiver Gets
	// the data and sends FIN once the read completes.
	ProtocolRDMARead Protocol = "rdma_read"
	// ProtocolRDMAWrite: START, REPLY with the receiver's key, DATA by Put,
	// FIN.
	ProtocolRDMAWrite Protocol = "rdma_write"
	// ProtocolRDMAReadAsync is rdma_read progressed by an event-driven
	// goroutine woken by solicited events while receives are pending
	// (seed 004 §4.3).
	ProtocolRDMAReadAsync Protocol = "rdma_read_async"
	// ProtocolPipeline is the send-based copy-in/copy-out pipeline; the PML
	// also falls back to it for BTLs without put/get.
	ProtocolPipeline Protocol = "pipeline"
)

// Unset marks an optional numeric job setting that was not given: the
// BTL's own value applies.
const Unset = -1

// Log levels accepted in the log block and in GOBTL_LOG.
var logLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

// ProgressParams is the schema of the job's progress block: how a rank
// waiting for completion backs off (spin, then yield, then sleep).
var ProgressParams = []core.Param{
	{Name: "spin", Type: core.ParamInt, Default: "2000", Min: "0",
		Doc: "busy polls of every module before the waiter starts yielding"},
	{Name: "yield", Type: core.ParamInt, Default: "50", Min: "0",
		Doc: "rounds of runtime.Gosched between polls before the waiter starts sleeping"},
	{Name: "sleep", Type: core.ParamDuration, Default: "10us", Min: "1ns",
		Doc: "first sleep between polls once yielding did not help; doubles up to max_sleep"},
	{Name: "max_sleep", Type: core.ParamDuration, Default: "500us", Min: "1ns",
		Doc: "longest sleep between polls (bounds the latency an idle rank adds)"},
}

// PlacementParams is the schema of the job's placement block: how `gobtl
// run` maps and binds the ranks it starts (its --map-by, --bind-to and
// --report-bindings, which take precedence). Ranks that mpirun or srun
// started keep the engine's binding.
var PlacementParams = []core.Param{
	{Name: "map_by", Type: core.ParamString, Default: "core", Enum: []string{"core", "numa", "socket"},
		Doc: "spread the ranks: fill the cores in order, or deal them round-robin over the NUMA nodes or sockets"},
	{Name: "bind_to", Type: core.ParamString, Default: "auto", Enum: []string{"auto", "core", "numa", "socket", "none"},
		Doc: "bind each rank to its core, its core's NUMA node or socket, or not at all; auto: its core when every rank gets one, else nothing"},
	{Name: "report_bindings", Type: core.ParamBool, Default: "false",
		Doc: "print each rank's binding as the job starts"},
}

// LogParams is the schema of the job's log block.
var LogParams = []core.Param{
	{Name: "level", Type: core.ParamString, Default: "warn", Enum: logLevels,
		Doc: "level of every component not named in components"},
	{Name: "components", Type: core.ParamMap, Check: checkComponentLevels,
		Doc: `level per component, e.g. { pml = "debug", "btl.sm" = "info" }; a name also covers its dotted children`},
}

// JobParams is the schema of the job block. `gobtl info` and `gobtl config
// show` print it like any component's.
var JobParams = []core.Param{
	{Name: "protocol", Type: core.ParamString, Default: string(ProtocolRDMARead),
		Enum: []string{string(ProtocolRDMARead), string(ProtocolRDMAWrite), string(ProtocolRDMAReadAsync), string(ProtocolPipeline)},
		Doc:  "rendezvous protocol above the eager limit; pipeline is send-based copy-in/copy-out (used anyway for BTLs without put/get)"},
	{Name: "eager_limit", Type: core.ParamSize,
		Doc: "cap on every BTL's own eager limit; unset: each BTL's own"},
	{Name: "rndv_eager_limit", Type: core.ParamSize,
		Doc: "user bytes carried inline in a rendezvous start; unset: each BTL's own"},
	{Name: "exclusive", Type: core.ParamBool, Default: "true",
		Doc: "a peer reachable by several BTLs uses only those of the highest exclusivity (shared memory, not the network, for local peers)"},
	{Name: "max_reads", Type: core.ParamInt, Min: "1",
		Doc: "cap on outstanding RDMA reads per endpoint; unset: each BTL's own"},
	{Name: "stall_timeout", Type: core.ParamDuration, Default: "0", Min: "0s",
		Doc: "fail a request that makes no progress for this long; 0: never"},
	{Name: "progress", Type: core.ParamBlock, Block: ProgressParams,
		Doc: "back-off of a waiting rank: spin, then yield, then sleep (doubling)"},
	{Name: "placement", Type: core.ParamBlock, Block: PlacementParams,
		Doc: "where gobtl run puts the ranks: map_by, bind_to, report_bindings"},
	{Name: "log", Type: core.ParamBlock, Block: LogParams,
		Doc: "logging levels; GOBTL_LOG overrides (GOBTL_LOG=debug or GOBTL_LOG=pml=debug,btl.sm=info)"},
}

// Job is the typed form of the job block, with defaults filled in.
type Job struct {
	Protocol Protocol
	// EagerLimit caps every BTL's eager limit, in bytes; Unset if not given.
	EagerLimit int64
	// RndvEagerLimit is the inline part of a rendezvous start; Unset if
	// not given.
	RndvEagerLimit int64
	// Exclusive: a peer uses only its highest-exclusivity BTLs.
	Exclusive bool
	// MaxReads caps outstanding reads per endpoint; Unset if not given.
	MaxReads int
	// StallTimeout fails requests that make no progress; 0 means never.
	StallTimeout time.Duration
	Progress     Progress
	Placement    Placement
	Log          Log
}

// Placement is how `gobtl run` maps and binds the ranks (the names of
// --map-by's and --bind-to's values; BindTo "auto" leaves the choice to
// the launcher).
type Placement struct {
	MapBy, BindTo  string
	ReportBindings bool
}

// Progress is how a waiting rank backs off.
type Progress struct {
	Spin     int
	Yield    int
	Sleep    time.Duration
	MaxSleep time.Duration
	// SpinSet and YieldSet say the stack chose Spin and Yield, which
	// start-up then leaves alone (it shortens the default spin of
	// oversubscribed ranks).
	SpinSet, YieldSet bool
}

// Log holds the logging levels of the log block.
type Log struct {
	// Level is the level of components not named in Components.
	Level string
	// Components maps a component name ("pml", "btl.sm") to its level.
	Components map[string]string
}

// DefaultJob is the job that an empty configuration describes.
func DefaultJob() Job {
	return jobFromParams(defaultJobParams())
}

func defaultJobParams() core.Params {
	p := core.MustParams(JobParams)
	fillJobBlocks(p)
	return p
}

// fillJobBlocks gives an absent progress, placement or log block its defaults, so the
// effective configuration always shows them.
func fillJobBlocks(p core.Params) {
	for _, name := range []string{"progress", "placement", "log"} {
		if len(p.Blocks(name)) == 0 {
			d, _ := p.Param(name)
			_ = p.Set(name, []core.Params{core.MustParams(d.Block)})
		}
	}
}

func jobFromParams(p core.Params) Job {
	opt := func(name string) int64 {
		if !p.Has(name) {
			return Unset
		}
		if d, _ := p.Param(name); d.Type == core.ParamInt {
			return int64(p.Int(name))
		}
		return p.Size(name)
	}
	prog := p.Blocks("progress")[0]
	lg := p.Blocks("log")[0]
	pl := p.Blocks("placement")[0]
	comps := map[string]string{}
	if lg.Has("components") {
		for k, v := range lg.Map("components") {
			comps[k] = v
		}
	}
	return Job{
		Protocol:       Protocol(p.String("protocol")),
		EagerLimit:     opt("eager_limit"),
		RndvEagerLimit: opt("rndv_eager_limit"),
		Exclusive:      p.Bool("exclusive"),
		MaxReads:       int(opt("max_reads")),
		StallTimeout:   p.Duration("stall_timeout"),
		Progress: Progress{
			Spin:     prog.Int("spin"),
			Yield:    prog.Int("yield"),
			Sleep:    prog.Duration("sleep"),
			MaxSleep: prog.Duration("max_sleep"),
			SpinSet:  prog.IsSet("spin"),
			YieldSet: prog.IsSet("yield"),
		},
		Placement: Placement{MapBy: pl.String("map_by"), BindTo: pl.String("bind_to"), ReportBindings: pl.Bool("report_bindings")},
		Log:       Log{Level: lg.String("level"), Components: comps},
	}
}

func checkComponentLevels(v any) error {
	m, _ := v.(map[string]string)
	var errs []string
	for _, k := range sortedKeys(m) {
		if k == "" {
			errs = append(errs, "a component name is empty")
		}
		if err := checkLevel(m[k]); err != nil {
			errs = append(errs, fmt.Sprintf("component %q: %v", k, err))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func checkLevel(s string) error {
	for _, l := range logLevels {
		if s == l {
			return nil
		}
	}
	return fmt.Errorf("level %q is not one of %s.%s", s, quoteList(logLevels), didYouMean(s, logLevels))
}
