package scale

import (
	"encoding/json"
	"math"
	"testing"
)

// rows are the records of one table of the run's JSON document, each
// decoded into a fresh T.
func rows[T any](t *testing.T, doc map[string]any, table string) []T {
	t.Helper()
	var out []T
	recs, _ := doc["records"].([]any)
	for _, r := range recs {
		r := r.(map[string]any)
		if r["table"] != table {
			continue
		}
		b, err := json.Marshal(r["row"])
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		t.Fatalf("no records of %q", table)
	}
	return out
}

// What the simulated runs count holds together the way seed 000 and 002
// describe the schemes: hardware and static flow control post their 100
// buffers of 2 KiB per connection and no more (and register exactly
// that), the hardware scheme sends no credit message, the static one
// carries the same application frames as the hardware one plus its
// explicit credit messages, the dynamic one posts between 1 and its
// bound of 128 and less memory than static; per-peer receive buffers
// register 288 KiB per peer, B-SRQ its 4 MiB slab plus 5 KiB per peer.
func TestTheSimulatedCountsHoldTogether(t *testing.T) {
	_, doc := quick(t, "flowcontrol", "recvbuf")
	runs := map[string]map[string]fcRun{}
	for _, r := range rows[fcRun](t, doc, "seed 000 runs") {
		if runs[r.Pattern] == nil {
			runs[r.Pattern] = map[string]fcRun{}
		}
		runs[r.Pattern][r.Scheme] = r
		switch r.Scheme {
		case "hardware", "static":
			perRank := float64(r.Conns) / float64(r.Ranks)
			if r.PostedMost != 100 || r.PostedMean != 100 || r.Registered != perRank*100*2048 {
				t.Errorf("%s %s: posted most %.0f mean %.2f, registered %.0f B for %.1f connections per rank", r.Pattern, r.Scheme, r.PostedMost, r.PostedMean, r.Registered, perRank)
			}
		case "dynamic":
			if r.PostedMost < 1 || r.PostedMost > 128 || r.PostedMean > r.PostedMost {
				t.Errorf("%s dynamic: posted most %.0f, mean %.2f", r.Pattern, r.PostedMost, r.PostedMean)
			}
		}
	}
	for p, by := range runs {
		hw, st, dy := by["hardware"], by["static"], by["dynamic"]
		if hw.ECM != 0 || hw.ECMMax != 0 {
			t.Errorf("%s: the hardware scheme sent %.2f credit messages per connection", p, hw.ECM)
		}
		if st.Conns != hw.Conns || math.Abs((st.Frames-st.ECM)-hw.Frames) > 1e-9 {
			t.Errorf("%s: static %.3f frames − %.3f ECM per connection (%d), hardware %.3f (%d)", p, st.Frames, st.ECM, st.Conns, hw.Frames, hw.Conns)
		}
		if dy.RecvMax > st.RecvMax {
			t.Errorf("%s: dynamic posted %d B, static %d B", p, dy.RecvMax, st.RecvMax)
		}
	}
	for _, m := range rows[map[string]float64](t, doc, "seed 002 receive memory at scale") {
		peers := m["ranks"] - 1
		if m["per-peer"] != peers*(288<<10) || m["B-SRQ"] != 4<<20+peers*(5<<10) {
			t.Errorf("%.0f ranks: per-peer %.0f B, B-SRQ %.0f B", m["ranks"], m["per-peer"], m["B-SRQ"])
		}
	}
}
