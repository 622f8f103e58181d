package bench

import (
	"io"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// barDelay is how long a run goes before it shows a progress bar: short
// runs print their table and nothing else.
const barDelay = 3 * time.Second

// bar is a progress bar over the sizes of a run, drawn only on rank 0,
// only when asked for, and only once the run has lasted barDelay.
type bar struct {
	w     io.Writer
	name  string
	total int
	n     int
	start time.Time
	p     *mpb.Progress
	b     *mpb.Bar
}

func newBar(on bool, w io.Writer, name string, total int) *bar {
	if !on || w == nil {
		return &bar{}
	}
	return &bar{w: w, name: name, total: total, start: time.Now()}
}

func (b *bar) step() {
	if b.w == nil {
		return
	}
	b.n++
	if b.p == nil && time.Since(b.start) > barDelay && b.n < b.total {
		// A slow refresh: the bar shares the CPU with the benchmark.
		b.p = mpb.New(mpb.WithOutput(b.w), mpb.WithRefreshRate(500*time.Millisecond), mpb.WithWidth(40))
		b.b = b.p.AddBar(int64(b.total),
			mpb.PrependDecorators(decor.Name(b.name+" "), decor.CountersNoUnit("%d/%d sizes")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
		b.b.SetCurrent(int64(b.n))
		return
	}
	if b.b != nil {
		b.b.Increment()
	}
}

func (b *bar) done() {
	if b.p == nil {
		return
	}
	b.b.SetTotal(int64(b.total), true)
	b.p.Wait()
	b.p = nil
}
