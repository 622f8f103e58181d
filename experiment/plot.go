package experiment

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/gobtl/gobtl/core"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Figure is one chart of lines with points: a paper's figure redrawn.
type Figure struct {
	Title, XLabel, YLabel string
	// LogX and LogY put an axis on a log scale (sizes and windows are
	// powers of two: a log scale spreads them evenly). XTicks replaces the
	// log axis's ticks (SizeTicks labels message sizes).
	LogX, LogY bool
	XTicks     plot.Ticker
	// The legend sits at the top right unless told otherwise.
	LegendBottom, LegendLeft bool
	// Lines in the order they are drawn; empty ones are left out.
	Lines []Line
}

// Line is one named curve.
type Line struct {
	Name string
	XY   plotter.XYs
}

// Curve is m as a curve, sorted by x, without the points a log axis
// cannot show (zero, negative, NaN).
func Curve(m map[int]float64) plotter.XYs {
	xs := make([]int, 0, len(m))
	for x := range m {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	var xy plotter.XYs
	for _, x := range xs {
		if v := m[x]; v > 0 && !math.IsNaN(v) {
			xy = append(xy, plotter.XY{X: float64(x), Y: v})
		}
	}
	return xy
}

// Figure writes f to file.png in the plot directory and names it on
// Out; without a directory, or without a line to draw, it writes
// nothing.
func (e *Env) Figure(file string, f Figure) error {
	if e.Plots == "" {
		return nil
	}
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text, p.Y.Label.Text = f.XLabel, f.YLabel
	if f.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if f.XTicks != nil {
		p.X.Tick.Marker = f.XTicks
	}
	if f.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Legend.Top, p.Legend.Left = !f.LegendBottom, f.LegendLeft
	var args []any
	for _, l := range f.Lines {
		if len(l.XY) > 0 {
			args = append(args, l.Name, l.XY)
		}
	}
	if len(args) == 0 {
		return nil
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return e.save(file, func(path string) error { return p.Save(7*vg.Inch, 4.5*vg.Inch, path) })
}

// Panels writes plots stacked vertically with aligned axes into one
// file.png, for figures that Figure cannot draw (shaded regions, panels).
func (e *Env) Panels(file string, plots ...*plot.Plot) error {
	if e.Plots == "" {
		return nil
	}
	const width, panel = 7 * vg.Inch, 3.2 * vg.Inch
	img := vgimg.New(width, panel*vg.Length(len(plots)))
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 3}, draw.New(img))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	return e.save(file, func(path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

func (e *Env) save(file string, write func(path string) error) error {
	if err := os.MkdirAll(e.Plots, 0o755); err != nil {
		return err
	}
	path := filepath.Join(e.Plots, file+".png")
	if err := write(path); err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "plot: %s\n", path)
	return nil
}

// SizeTicks labels a log axis of message sizes at the powers of four: 4,
// 16, 64, 256, 1KiB...
type SizeTicks struct{}

// Ticks implements plot.Ticker.
func (SizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := 1.0; v <= hi; v *= 4 {
		if v >= lo {
			t = append(t, plot.Tick{Value: v, Label: core.FormatSize(int64(v))})
		}
	}
	return t
}
