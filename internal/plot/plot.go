// Package plot draws the programs' figures with gonum/plot: the papers'
// figures that `gobtl experiment` redraws and the curves of bench/compare.
// A Figure is lines of points over two axes, either of them on a log scale
// (message sizes and windows are powers of two); a Dir writes it as a PNG
// file and names the file on its Out, or writes nothing when it has no
// directory, so a program draws unconditionally and the user's flag
// decides. Figures that are more than lines (shaded regions, panels) are
// gonum plots the caller builds, laid out by Dir.Panels.
package plot

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/gobtl/gobtl/core"
)

// Figure is one chart of lines with points: a paper's figure redrawn.
type Figure struct {
	Title, XLabel, YLabel string
	// LogX and LogY put an axis on a log scale (sizes and windows are
	// powers of two: a log scale spreads them evenly). XTicks replaces the
	// log axis's ticks (SizeTicks labels message sizes).
	LogX, LogY bool
	XTicks     gonum.Ticker
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

// Dir is where figures go.
type Dir struct {
	// Path is the directory; "" writes no figure.
	Path string
	// Out, if set, receives a line "plot: PATH" for every file written.
	Out io.Writer
}

// Figure writes f to file.png in the directory and names it on Out;
// without a directory, or without a line to draw, it writes nothing.
func (d Dir) Figure(file string, f Figure) error {
	if d.Path == "" {
		return nil
	}
	p := gonum.New()
	p.Title.Text = f.Title
	p.X.Label.Text, p.Y.Label.Text = f.XLabel, f.YLabel
	if f.LogX {
		p.X.Scale, p.X.Tick.Marker = gonum.LogScale{}, gonum.LogTicks{Prec: -1}
	}
	if f.XTicks != nil {
		p.X.Tick.Marker = f.XTicks
	}
	if f.LogY {
		p.Y.Scale, p.Y.Tick.Marker = gonum.LogScale{}, gonum.LogTicks{Prec: -1}
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
	return d.save(file, func(path string) error { return p.Save(7*vg.Inch, 4.5*vg.Inch, path) })
}

// Panels writes plots stacked vertically with aligned axes into one
// file.png, for figures that Figure cannot draw (shaded regions, panels).
func (d Dir) Panels(file string, plots ...*gonum.Plot) error {
	if d.Path == "" {
		return nil
	}
	const width, panel = 7 * vg.Inch, 3.2 * vg.Inch
	img := vgimg.New(width, panel*vg.Length(len(plots)))
	grid := make([][]*gonum.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*gonum.Plot{p}
	}
	canvases := gonum.Align(grid, draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 3}, draw.New(img))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	return d.save(file, func(path string) error {
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

func (d Dir) save(file string, write func(path string) error) error {
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return err
	}
	path := filepath.Join(d.Path, file+".png")
	if err := write(path); err != nil {
		return err
	}
	if d.Out != nil {
		fmt.Fprintf(d.Out, "plot: %s\n", path)
	}
	return nil
}

// SizeTicks labels a log axis of message sizes at the powers of four: 4,
// 16, 64, 256, 1KiB...
type SizeTicks struct{}

// Ticks implements gonum/plot's Ticker.
func (SizeTicks) Ticks(lo, hi float64) []gonum.Tick {
	var t []gonum.Tick
	for v := 1.0; v <= hi; v *= 4 {
		if v >= lo {
			t = append(t, gonum.Tick{Value: v, Label: core.FormatSize(int64(v))})
		}
	}
	return t
}
