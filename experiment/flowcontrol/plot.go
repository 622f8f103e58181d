package flowcontrol

import "github.com/gobtl/gobtl/experiment"

// plot draws a line per scheme of res[scheme][x] against x on a log axis.
func (x *exp) plot(file, title, xlabel, ylabel string, logY bool, res map[string]map[int]float64) error {
	f := experiment.Figure{Title: title, XLabel: xlabel, YLabel: ylabel, LogX: true, LogY: logY}
	for _, sc := range Schemes {
		f.Lines = append(f.Lines, experiment.Line{Name: sc, XY: experiment.Curve(res[sc])})
	}
	return x.Figure(file, f)
}
