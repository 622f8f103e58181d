package extoll

import (
	"context"
	"strings"
	"testing"
)

func TestSimTable3ComparesTheSchemesOnTheSimulatedFabric(t *testing.T) {
	o := SimOptions{Nodes: 4, PerNode: []int{1, 2}, Iters: 2, PingpongIters: 20}
	rows, err := SimTable3(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteSimTable(&b, rows)
	t.Log("\n" + b.String())
	if len(rows) != 2*2*2 {
		t.Fatalf("%d rows, want 8 (2 shapes × 2 patterns × 2 schemes)", len(rows))
	}
	for i := 0; i < len(rows); i += 2 {
		st, dy := rows[i], rows[i+1]
		if st.Scheme != "extoll_static" || dy.Scheme != "extoll_dynamic" || st.Ranks != st.Nodes*st.PerNode {
			t.Fatalf("rows %d-%d: %+v, %+v", i, i+1, st, dy)
		}
		for _, r := range []SimRow{st, dy} {
			if want := int64(r.Ranks * r.SlotsPerPeer * 64); r.MailboxBytes != want {
				t.Errorf("%s %s at %d ranks: mailbox %d B, want %d (slots × 64 B)", r.Pattern, r.Scheme, r.Ranks, r.MailboxBytes, want)
			}
			if r.Sends == 0 || r.UsPerIter <= 0 || r.RefUsPerIter <= 0 || r.DelayedPct < 0 || r.DelayedPct > 100 {
				t.Errorf("%s %s at %d ranks: %d sends, %.1f µs (reference %.1f), %.1f%% delayed", r.Pattern, r.Scheme, r.Ranks, r.Sends, r.UsPerIter, r.RefUsPerIter, r.DelayedPct)
			}
		}
		// Table 3: the dynamic scheme's buffers are a quarter of the
		// static one's, which its larger records do not make up for.
		if dy.MemoryBytes >= st.MemoryBytes {
			t.Errorf("%s at %d ranks: dynamic %d B per process, static %d B", st.Pattern, st.Ranks, dy.MemoryBytes, st.MemoryBytes)
		}
		// A dynamic sender starts with credit_slots credits: a 37-packet
		// train to each peer must wait.
		if st.Pattern == "alltoall" && dy.DelayedSends == 0 {
			t.Errorf("alltoall at %d ranks: no dynamic send waited for credits", dy.Ranks)
		}
	}
}
