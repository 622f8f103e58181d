package multirail

import (
	"fmt"
	"image/color"
	"math"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"

	"github.com/gobtl/gobtl/internal/plot"
)

// plotCurves writes one figure per bench: the value against message size
// for every config.
func (x *exp) plotCurves(file, title string, res curves, order []string) error {
	labels := map[string]string{"latency": "latency (us)", "bw": "bandwidth (MB/s)", "bibw": "bidirectional bandwidth (MB/s)"}
	for _, b := range []string{"latency", "bw", "bibw"} {
		f := plot.Figure{
			Title: title + ": " + labels[b], XLabel: "message size (bytes)", YLabel: labels[b],
			LogX: true, XTicks: plot.SizeTicks{}, LogY: true,
			// Latency grows with size, bandwidth too: keep the legend off the curves.
			LegendBottom: b != "latency", LegendLeft: b == "latency",
		}
		for _, c := range order {
			f.Lines = append(f.Lines, plot.Line{Name: c, XY: plot.Curve(res[b][c])})
		}
		if err := x.Figure(fmt.Sprintf("%s-%s", file, b), f); err != nil {
			return err
		}
	}
	return nil
}

// plotLoad writes Fig. 20: bandwidth over time for even and adaptive
// striping, the load shaded, and below it adaptive's weights.
func (x *exp) plotLoad(runs []loadRun) error {
	if x.Plots == "" {
		return nil
	}
	bw, wt := gonum.New(), gonum.New()
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
	return x.Panels("fig20-load", bw, wt)
}

// plotWindow writes out-of-order arrivals per 1000 messages against W.
func (x *exp) plotWindow(rows []windowRow) error {
	var xy plotter.XYs
	for _, r := range rows {
		if r.w > 0 {
			xy = append(xy, plotter.XY{X: float64(r.w), Y: 1000 * r.ooo / float64(max(1, r.msgs))})
		}
	}
	return x.Figure("window-out-of-order", plot.Figure{
		Title:  fmt.Sprintf("window round robin, fast rail + slow rail (+%s): out-of-order arrivals", windowDelay),
		XLabel: "W (messages per subchannel before switching)", YLabel: "out of order per 1000 messages",
		LogX: true, LegendBottom: true,
		Lines: []plot.Line{{Name: "window_round_robin", XY: xy}},
	})
}
