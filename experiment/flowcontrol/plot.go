package flowcontrol

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plot writes one PNG: a line per scheme of res[scheme][x].
func (x *exp) plot(file, title, xlabel, ylabel string, logY bool, res map[string]map[int]float64) error {
	if x.Plots == "" {
		return nil
	}
	if err := os.MkdirAll(x.Plots, 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	// Sizes and windows are powers of two: a log scale spreads them evenly.
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	var args []any
	for _, sc := range Schemes {
		var xs []int
		for k := range res[sc] {
			xs = append(xs, k)
		}
		slices.Sort(xs)
		var xy plotter.XYs
		for _, k := range xs {
			xy = append(xy, plotter.XY{X: float64(k), Y: res[sc][k]})
		}
		if len(xy) > 0 {
			args = append(args, sc, xy)
		}
	}
	if len(args) == 0 {
		return nil
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	path := filepath.Join(x.Plots, file+".png")
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return err
	}
	fmt.Fprintf(x.w, "plot: %s\n", path)
	return nil
}
