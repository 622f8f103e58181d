//go:build rdmacore && cgo

package rdmacore

import (
	"testing"

	"github.com/gobtl/gobtl/btl/ib/verbs"
)

func TestPortRateFollowsWidthAndSpeed(t *testing.T) {
	for _, c := range []struct {
		width, speed uint8
		want         float64
	}{
		{2, 1, 1e9},           // 4x SDR: 10 Gb/s signalling, 8 Gb/s data
		{1, 1, 250e6},         // 1x SDR
		{2, 4, 4e9},           // 4x QDR
		{2, 32, 12.5e9},       // 4x EDR
		{0, 1, 0}, {2, 99, 0}, // unknown codes
	} {
		if got := portRate(c.width, c.speed); got != c.want {
			t.Errorf("width %d speed %d: %v B/s, want %v", c.width, c.speed, got, c.want)
		}
	}
}

// TestDevicesOpenIfAnyExist runs on machines with an HCA; elsewhere it says
// so and skips.
func TestDevicesOpenIfAnyExist(t *testing.T) {
	p, err := verbs.OpenProvider("rdmacore", "")
	if err != nil {
		t.Fatal(err)
	}
	devs, err := p.Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no InfiniBand device here (%v): the provider is compiled, not exercised", err)
	}
	d, err := p.Open(devs[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, err := d.Query()
	if err != nil || a.PhysPortCnt < 1 {
		t.Fatalf("query: %+v %v", a, err)
	}
	if _, err := d.QueryPort(1); err != nil {
		t.Fatal(err)
	}
}
