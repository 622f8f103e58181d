package flowcontrol

import "github.com/gobtl/gobtl/internal/plot"

// plot draws a line per scheme of res[scheme][x] against x on a log axis.
func (x *exp) plot(file, title, xlabel, ylabel string, logY bool, res map[string]map[int]float64) error {
	f := plot.Figure{Title: title, XLabel: xlabel, YLabel: ylabel, LogX: true, LogY: logY}
	for _, sc := range Schemes {
		f.Lines = append(f.Lines, plot.Line{Name: sc, XY: plot.Curve(res[sc])})
	}
	return x.Figure(file, f)
}
