package multirail

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// sizeTicks labels powers of two as 4, 1K, 1M.
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	var t []plot.Tick
	for v := 1.0; v <= max; v *= 4 {
		if v < min {
			continue
		}
		t = append(t, plot.Tick{Value: v, Label: sizeName(int(v))})
	}
	return t
}

// plotCurves writes one PNG per bench: the value against message size for
// every config.
func (x *exp) plotCurves(file, title string, res curves, order []string) error {
	if x.Plots == "" {
		return nil
	}
	if err := os.MkdirAll(x.Plots, 0o755); err != nil {
		return err
	}
	labels := map[string]string{"latency": "latency (us)", "bw": "bandwidth (MB/s)", "bibw": "bidirectional bandwidth (MB/s)"}
	for _, b := range []string{"latency", "bw", "bibw"} {
		p := plot.New()
		p.Title.Text = title + ": " + labels[b]
		p.X.Label.Text = "message size (bytes)"
		p.Y.Label.Text = labels[b]
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, sizeTicks{}
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Legend.Top, p.Legend.Left = b == "latency", b == "latency"
		var args []any
		for _, c := range order {
			var xy plotter.XYs
			for _, n := range sortedSizes(res[b][c]) {
				if v := res[b][c][n]; v > 0 && !math.IsNaN(v) {
					xy = append(xy, plotter.XY{X: float64(n), Y: v})
				}
			}
			if len(xy) > 0 {
				args = append(args, c, xy)
			}
		}
		if len(args) == 0 {
			continue
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return err
		}
		path := filepath.Join(x.Plots, fmt.Sprintf("%s-%s.png", file, b))
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return err
		}
		fmt.Fprintf(x.w, "plot: %s\n", path)
	}
	return nil
}

func sortedSizes(m map[int]float64) []int {
	s := make([]int, 0, len(m))
	for n := range m {
		s = append(s, n)
	}
	sort.Ints(s)
	return s
}

// plotLoad writes Fig. 20: bandwidth over time for even and adaptive
// striping, the load shaded, and below it adaptive's weights.
func (x *exp) plotLoad(runs []loadRun) error {
	if x.Plots == "" {
		return nil
	}
	if err := os.MkdirAll(x.Plots, 0o755); err != nil {
		return err
	}
	bw, wt := plot.New(), plot.New()
	bw.Title.Text = "bandwidth while a second job loads rail 1 (1MiB messages, 100ms samples)"
	bw.Y.Label.Text = "MB/s"
	wt.Title.Text = "adaptive striping weights (receiver)"
	wt.X.Label.Text, wt.Y.Label.Text = "time (s)", "weight (W_total 100)"
	ymax := 0.0
	var args []any
	for _, r := range runs {
		var xy plotter.XYs
		for _, p := range r.points() {
			xy = append(xy, plotter.XY{X: p.t, Y: p.mbps})
			ymax = math.Max(ymax, p.mbps)
		}
		args = append(args, r.policy, xy)
	}
	// The load of the adaptive run, shaded.
	on, off := runs[len(runs)-1].loadWindow()
	shade, err := plotter.NewPolygon(plotter.XYs{{X: on, Y: 0}, {X: off, Y: 0}, {X: off, Y: ymax * 1.05}, {X: on, Y: ymax * 1.05}})
	if err != nil {
		return err
	}
	shade.Color, shade.LineStyle.Width = color.Gray{Y: 225}, 0
	bw.Add(shade)
	if err := plotutil.AddLines(bw, args...); err != nil {
		return err
	}
	bw.Legend.Add("second job on rail 1", shade)
	var w0, w1 plotter.XYs
	for _, p := range runs[len(runs)-1].points() {
		if len(p.weights) == 2 {
			w0 = append(w0, plotter.XY{X: p.t, Y: p.weights[0]})
			w1 = append(w1, plotter.XY{X: p.t, Y: p.weights[1]})
		}
	}
	if len(w0) > 0 {
		if err := plotutil.AddLines(wt, "rail 0", w0, "rail 1 (loaded)", w1); err != nil {
			return err
		}
	}
	wt.Y.Min, wt.Y.Max = 0, 100
	return x.savePanels(filepath.Join(x.Plots, "fig20-load.png"), bw, wt)
}

// savePanels stacks plots vertically, aligned, in one PNG.
func (x *exp) savePanels(path string, plots ...*plot.Plot) error {
	const width, panel = 7 * vg.Inch, 3.2 * vg.Inch
	img := vgimg.New(width, panel*vg.Length(len(plots)))
	dc := draw.New(img)
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 3}, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(x.w, "plot: %s\n", path)
	return nil
}

// plotWindow writes out-of-order arrivals per 1000 messages against W.
func (x *exp) plotWindow(rows []windowRow) error {
	if x.Plots == "" {
		return nil
	}
	if err := os.MkdirAll(x.Plots, 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("window round robin, fast rail + slow rail (+%s): out-of-order arrivals", windowDelay)
	p.X.Label.Text, p.Y.Label.Text = "W (messages per subchannel before switching)", "out of order per 1000 messages"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	var xy plotter.XYs
	for _, r := range rows {
		if r.w > 0 {
			xy = append(xy, plotter.XY{X: float64(r.w), Y: 1000 * r.ooo / float64(max(1, r.msgs))})
		}
	}
	if err := plotutil.AddLinePoints(p, "window_round_robin", xy); err != nil {
		return err
	}
	path := filepath.Join(x.Plots, "window-out-of-order.png")
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return err
	}
	fmt.Fprintf(x.w, "plot: %s\n", path)
	return nil
}
