package extoll

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/gobtl/gobtl/btl/extoll/mailbox"
	"github.com/gobtl/gobtl/btl/extoll/softnic"
	"github.com/gobtl/gobtl/btl/extoll/velo"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/experiment"
	extolldynamic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_dynamic"
	extollstatic "github.com/gobtl/gobtl/policies/flowcontrol/extoll_static"
)

// Memory is what one process of an n-rank job allocates for EXTOLL flow
// control, measured (seed 003 §7.5, Table 3).
type Memory struct {
	Scheme       string `json:"scheme"`
	N            int    `json:"n"`
	SlotsPerPeer int    `json:"slots_per_peer"`
	// Heap is the live heap the engine and its policy hold once built,
	// from runtime.MemStats (HeapAlloc after a GC, after minus before
	// velo.New, the median of five builds): per-sender records, threshold
	// FIFOs, guards, the dynamic policy's activity lists — and the
	// per-peer counters the engine keeps for observability, which the
	// paper's structures do not have.
	Heap int64 `json:"heap_bytes"`
	// Allocated is all that building them allocates, temporaries
	// included (TotalAlloc, the least of five builds).
	Allocated int64 `json:"allocated_bytes"`
	// Accounted is the engine's own count of its flow-control records
	// (velo.Engine.StateBytes: the quantity of Eq. 7 without the policy).
	Accounted int `json:"accounted_bytes"`
	// Mailbox is the mailbox the device mapped: the buffers of Eq. 7-8
	// (64-byte slots) and the ring's control block.
	Mailbox int `json:"mailbox_bytes"`
}

// Total is the measured bytes: heap plus mailbox.
func (m Memory) Total() int64 { return m.Heap + int64(m.Mailbox) }

// MeasureMemory opens rank 0 of an n-rank job's EXTOLL device with
// slotsPerPeer·n mailbox slots and the scheme's engine, and measures what
// the engine allocates. No peer is ever reached: the device is not
// connected, only built.
func MeasureMemory(scheme string, slotsPerPeer, n int) (Memory, error) {
	m := Memory{Scheme: scheme, N: n, SlotsPerPeer: slotsPerPeer}
	var pol core.FlowControl
	switch scheme {
	case "extoll_static":
		pol = &extollstatic.Policy{CreditSlots: 2}
	case "extoll_dynamic":
		pol = &extolldynamic.Policy{CreditSlots: 2}
	default:
		return m, fmt.Errorf("memory of scheme %q: want extoll_static or extoll_dynamic", scheme)
	}
	slots := slotsPerPeer * n
	dev, err := softnic.Open(softnic.Config{
		Rank: 0, Size: n, JobID: fmt.Sprintf("mem%d-%d", os.Getpid(), time.Now().UnixNano()), Name: "mem", Slots: slots,
		Resolve: func(context.Context, int) (softnic.Addr, error) { return softnic.Addr{}, errors.New("not connected") },
	})
	if err != nil {
		return m, err
	}
	defer dev.Close()
	// Five builds: the least allocated is the engine's own (anything else
	// the process allocates in the window, the device's goroutines, the
	// runtime, only adds); the live heap is the median of the five, as a
	// GC in the window can free others' garbage.
	var live []float64
	for try := range 5 {
		metrics := core.NewMetrics()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		eng, err := velo.New(dev, velo.Config{Rank: 0, Size: n, Slots: slots, Policy: pol, Metrics: metrics, Prefix: "extoll.mem"})
		if err != nil {
			return m, err
		}
		runtime.ReadMemStats(&after)
		if b := int64(after.TotalAlloc - before.TotalAlloc); try == 0 || b < m.Allocated {
			m.Allocated = b
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		live = append(live, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)))
		m.Accounted = eng.StateBytes()
		runtime.KeepAlive(eng)
		runtime.KeepAlive(metrics)
	}
	m.Heap = int64(experiment.Median(live))
	m.Mailbox = mailbox.Size(slots)
	runtime.KeepAlive(pol)
	return m, nil
}

// memoryNs are Table 3's job sizes measured (the paper's own rows are
// 1K to 256K processes, given by the formula).
var memoryNs = []int{4, 16, 64, 256, 1024}

// memory is Equations 7-8 and Table 3: the formula, the paper's table and
// what the engines allocate here.
func (x *exp) memory() error {
	w := x.Out
	const table = "Table 3 memory"
	fmt.Fprintln(w, "== Memory per process (seed 003 §7.5, Eq. 7-8, Table 3)")
	fmt.Fprintln(w, "Paper: structures static 4n+2 B, dynamic 150n B; with the buffers that keep the IMB overhead under 3%")
	fmt.Fprintln(w, "(64 slots/process static, 16 dynamic, 64 B each): static 4n+2+4096n (Eq. 7), dynamic 150n+1024n bytes (Eq. 8).")
	fmt.Fprintln(w, "Measured: rank 0 of an n-rank job builds its device (mailbox mapped in /dev/shm, its size is the")
	fmt.Fprintln(w, "buffers) and its engine with the scheme's policy; heap = live heap it holds (runtime.MemStats HeapAlloc after")
	fmt.Fprintln(w, "GC, after minus before velo.New, median of 5 builds: records, FIFOs, guards, activity lists, per-peer counters);")
	fmt.Fprintln(w, "allocated = all velo.New allocates, temporaries included (TotalAlloc, least of 5);")
	fmt.Fprintln(w, "accounted = the engine's own count of its flow-control records (velo.Engine.StateBytes).")
	if x.plugins() {
		fmt.Fprintln(w, "(the policies run in this process here: their per-peer state is part of what Eq. 8 counts)")
	}
	fmt.Fprintf(w, "%-6s | %12s %12s %12s %12s | %12s %12s %12s %12s | %s\n", "n",
		"Eq.7 static", "heap", "mailbox", "total", "Eq.8 dynamic", "heap", "mailbox", "total", "dynamic / static measured")
	for _, n := range memoryNs {
		x.Begin("extoll: memory, %d ranks", n)
		st, err := MeasureMemory("extoll_static", 64, n)
		if err != nil {
			return fmt.Errorf("static, %d ranks: %w", n, err)
		}
		dy, err := MeasureMemory("extoll_dynamic", 16, n)
		if err != nil {
			return fmt.Errorf("dynamic, %d ranks: %w", n, err)
		}
		eq7, eq8 := 4*n+2+4096*n, 150*n+1024*n
		r := float64(dy.Total()) / float64(st.Total())
		v := "(fixed costs weigh here)"
		if n >= 64 {
			v = x.Check(table, fmt.Sprintf("n=%d", n), "the dynamic scheme needs about a quarter of the static one's memory (dynamic / static; paper 0.29)", r, experiment.AtMost(0.35))
		}
		fmt.Fprintf(w, "%-6d | %12s %12s %12s %12s | %12s %12s %12s %12s | %.2f %s\n", n,
			bytes(int64(eq7)), bytes(st.Heap), bytes(int64(st.Mailbox)), bytes(st.Total()),
			bytes(int64(eq8)), bytes(dy.Heap), bytes(int64(dy.Mailbox)), bytes(dy.Total()), r, v)
		fmt.Fprintf(w, "%-6s | per peer: static accounted %d B, heap %.0f B, allocated %.0f B (paper 4 B); dynamic accounted %d B, heap %.0f B, allocated %.0f B (paper 150 B)\n",
			"", st.Accounted/n, float64(st.Heap)/float64(n), float64(st.Allocated)/float64(n), dy.Accounted/n, float64(dy.Heap)/float64(n), float64(dy.Allocated)/float64(n))
		x.Record(table, map[string]any{"n": n, "eq7": eq7, "eq8": eq8, "static": st, "dynamic": dy})
	}
	fmt.Fprintln(w, "Paper's Table 3 (formula, n = 1K..256K): static 4/16/64/256/1024 MB, dynamic 1.14/4.6/18.3/73.3/293.5 MB;")
	fmt.Fprintln(w, "per peer the buffers (4096 B static, 1024 B dynamic) dominate both here and there.")
	return nil
}

func bytes(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
