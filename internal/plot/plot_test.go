package plot

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

func TestACurveIsSortedAndKeepsOnlyWhatALogAxisShows(t *testing.T) {
	got := Curve(map[int]float64{1024: 3, 4: 1, 64: 2, 8: 0, 16: -1, 32: math.NaN()})
	want := plotter.XYs{{X: 4, Y: 1}, {X: 64, Y: 2}, {X: 1024, Y: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Curve = %v, want %v", got, want)
	}
}

func TestSizeTicksLabelThePowersOfFourInRange(t *testing.T) {
	var labels []string
	for _, tk := range (SizeTicks{}).Ticks(10, 5000) {
		labels = append(labels, tk.Label)
	}
	if want := []string{"16B", "64B", "256B", "1KiB", "4KiB"}; !reflect.DeepEqual(labels, want) {
		t.Fatalf("ticks %q, want %q", labels, want)
	}
}

// A Dir without a path writes nothing, and one with a path writes a PNG
// only for a figure with a line, naming each file it writes on Out.
func TestADirWritesAndNamesOnlyFiguresWithLines(t *testing.T) {
	var out bytes.Buffer
	f := Figure{Title: "t", LogX: true, LogY: true, XTicks: SizeTicks{}, Lines: []Line{{Name: "a", XY: Curve(map[int]float64{4: 1, 64: 2})}}}
	if err := (Dir{Out: &out}).Figure("fig", f); err != nil || out.Len() != 0 {
		t.Fatalf("without a directory: %v %q", err, out.String())
	}
	d := Dir{Path: filepath.Join(t.TempDir(), "plots"), Out: &out}
	if err := d.Figure("empty", Figure{Lines: []Line{{Name: "none"}}}); err != nil || out.Len() != 0 {
		t.Fatalf("a figure without points: %v %q", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(d.Path, "empty.png")); !os.IsNotExist(err) {
		t.Fatalf("a figure without points was written: %v", err)
	}
	if err := d.Figure("fig", f); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.Path, "fig.png")
	if !isPNG(t, path) || out.String() != "plot: "+path+"\n" {
		t.Fatalf("Out %q", out.String())
	}
}

func TestPanelsStackPlotsInOneFile(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	a, b := gonum.New(), gonum.New()
	a.Title.Text, b.Title.Text = "top", "bottom"
	if err := d.Panels("two", a, b); err != nil {
		t.Fatal(err)
	}
	isPNG(t, filepath.Join(d.Path, "two.png"))
}

func isPNG(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG file: %v", path, err)
	}
	return true
}
