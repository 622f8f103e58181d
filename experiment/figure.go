package experiment

import (
	gonum "gonum.org/v1/plot"

	"github.com/gobtl/gobtl/internal/plot"
)

// Figure writes f to file.png in the plot directory (Plots) and names it
// on Out; without a directory it writes nothing (plot.Dir.Figure).
func (e *Env) Figure(file string, f plot.Figure) error { return e.plots().Figure(file, f) }

// Panels writes plots stacked vertically with aligned axes into one
// file.png, for figures that Figure cannot draw (plot.Dir.Panels).
func (e *Env) Panels(file string, plots ...*gonum.Plot) error {
	return e.plots().Panels(file, plots...)
}

func (e *Env) plots() plot.Dir { return plot.Dir{Path: e.Plots, Out: e.Out} }
