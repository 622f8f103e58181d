package experiment

import (
	"fmt"
	"io"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress counts an experiment's runs against the number its steps
// announced and estimates the time left from the mean time of a run so
// far. A step that starts more runs than it announced stays at its
// share; one that starts fewer jumps to it when it ends, so a wrong guess
// costs accuracy within one step only.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	// done runs before this step, this step's share, runs it has begun.
	base, share, begun int
	p                  *mpb.Progress
	bar                *mpb.Bar
}

func newProgress(w io.Writer, bar bool, name string, total int) *progress {
	if w == nil {
		w = io.Discard
	}
	pr := &progress{w: w, total: total, start: time.Now()}
	if bar && total > 0 {
		// A slow refresh: the bar shares the cores with the ranks.
		pr.p = mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(500*time.Millisecond), mpb.WithWidth(40))
		pr.bar = pr.p.AddBar(int64(total),
			mpb.PrependDecorators(decor.Name(name+" "), decor.CountersNoUnit("%d/%d runs")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO), decor.Any(func(s decor.Statistics) string {
				return " " + eta(pr.start, int(s.Current), int(s.Total))
			})))
	}
	return pr
}

// eta says how long the runs left take at the mean pace of those done.
func eta(start time.Time, done, total int) string {
	if done <= 0 {
		return "ETA -"
	}
	left := time.Duration(float64(time.Since(start)) / float64(done) * float64(max(total-done, 0)))
	return "ETA " + left.Round(time.Second).String()
}

func (p *progress) done() int { return p.base + min(max(p.begun-1, 0), max(p.share-1, 0)) }

func (p *progress) startStep(share int) { p.share, p.begun = share, 0 }

func (p *progress) endStep() {
	p.base += p.share
	p.share, p.begun = 0, 0
	if p.bar != nil {
		p.bar.SetCurrent(int64(p.base))
	}
}

// begin is a run starting: the one before it (in this step) is done.
func (p *progress) begin(line string) {
	p.begun++
	d := p.done()
	if p.bar != nil {
		p.bar.SetCurrent(int64(d))
		fmt.Fprintln(p.p, line)
		return
	}
	if p.total == 0 {
		fmt.Fprintln(p.w, line)
		return
	}
	fmt.Fprintf(p.w, "%s [%d/%d runs done, %v, %s]\n", line, d, p.total, time.Since(p.start).Round(time.Second), eta(p.start, d, p.total))
}

func (p *progress) finish() {
	if p.bar == nil {
		return
	}
	p.bar.SetTotal(-1, true)
	p.p.Wait()
	p.bar, p.p = nil, nil
}
