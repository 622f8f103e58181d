package core

import "testing"

// Metrics a component keeps in its own structures appear in a snapshot
// under the names its collector gives, in the registry's formats, and as
// they are when the snapshot is taken.
func TestCollectedMetricsAppearInSnapshotsAsTheyAreThen(t *testing.T) {
	m := NewMetrics()
	m.Counter("x.registered").Add(2)
	var c Counter
	var g Gauge
	h := NewHistogram([]float64{10})
	m.Collect(func(add func(string, any)) {
		add("x.kept.peer3", &c)
		add("x.level.peer3", &g)
		add("x.sizes", h)
	})
	c.Add(5)
	g.Set(7)
	g.Set(4)
	h.Observe(20)
	s := m.Snapshot()
	if s["x.registered"] != int64(2) || s["x.kept.peer3"] != int64(5) {
		t.Fatalf("counters in the snapshot: %v", s)
	}
	if lv, ok := s["x.level.peer3"].(map[string]int64); !ok || lv["value"] != 4 || lv["max"] != 7 {
		t.Fatalf("gauge in the snapshot: %v", s["x.level.peer3"])
	}
	if hs, ok := s["x.sizes"].(HistogramSnapshot); !ok || hs.Count != 1 || hs.Counts[1] != 1 {
		t.Fatalf("histogram in the snapshot: %v", s["x.sizes"])
	}
	c.Inc()
	if got := m.Snapshot()["x.kept.peer3"]; got != int64(6) {
		t.Fatalf("a later snapshot reads %v, want 6", got)
	}
	if names := m.Names(); len(names) != 4 {
		t.Fatalf("names %v", names)
	}
}
