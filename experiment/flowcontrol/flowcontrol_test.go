package flowcontrol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/experiment"
)

// TestTheBandwidthTestRunsEveryScheme runs the bandwidth test on the
// experiment's stacks, the ranks as goroutines each on its own softrc
// HCA, and checks each scheme acts as seed 000 says once the window
// exceeds the buffers: the hardware scheme's receiver sends RNR NAKs, the
// static sender stalls, the dynamic receiver posts more buffers; while
// the window fits them (window 1 on 2 buffers) none of that happens.
// The counters of a row are those of its timed windows alone: the
// messages' bytes each way are exactly Size × window × Iters, the warm-up
// windows left out.
func TestTheBandwidthTestRunsEveryScheme(t *testing.T) {
	for _, c := range []struct {
		scheme string
		side   func(BWRow) map[string]int64
		metric string
	}{
		{"hardware", func(r BWRow) map[string]int64 { return r.Receiver }, "rnr_naks_sent"},
		{"static", func(r BWRow) map[string]int64 { return r.Sender }, ".stalls.peer1"},
		{"dynamic", func(r BWRow) map[string]int64 { return r.Receiver }, ".posted_max.peer0"},
	} {
		t.Run(c.scheme, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stack.hcl")
			if err := os.WriteFile(path, []byte(Stack((&experiment.Env{}).PolicyLines, c.scheme, 2, 64, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var out bytes.Buffer
			err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(cm *gobtl.Comm) error {
				var mine bytes.Buffer
				err := BW(cm, BWOptions{Size: 4, Windows: []int{1, 64}, Iters: 20, Warmup: 2}, &mine)
				mu.Lock()
				out.Write(mine.Bytes())
				mu.Unlock()
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var rows []BWRow
			for sc := bufio.NewScanner(&out); sc.Scan(); {
				var r BWRow
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r)
			}
			if len(rows) != 2 || rows[0].Window != 1 || rows[1].Window != 64 || rows[1].MBps <= 0 {
				t.Fatalf("rows %+v, want windows 1 and 64 with a bandwidth", rows)
			}
			least := int64(1)
			if c.scheme == "dynamic" {
				least = 3 // started at 2
			}
			if n := sum(c.side(rows[1]), c.metric); n < least {
				t.Errorf("window 64 on 2 buffers: %s = %d, want at least %d", c.metric, n, least)
			}
			if n, want := sum(c.side(rows[0]), c.metric), least-1; n != want {
				t.Errorf("window 1 on 2 buffers: %s = %d, want %d", c.metric, n, want)
			}
			for _, r := range rows {
				moved := int64(4 * r.Window * 20)
				if s, got := r.Sender["pml.bytes_sent"], r.Receiver["pml.bytes_recv"]; s != moved || got != moved {
					t.Errorf("window %d: %d bytes sent and %d received in the timed windows, want %d", r.Window, s, got, moved)
				}
			}
		})
	}
}

// With Blocking the sides use Send and Recv: the rows are the same, every
// timed message counted on both sides, and rank 2 of a larger job sits
// the test out.
func TestTheBlockingBandwidthTestCountsEveryTimedMessage(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{}, func(cm *gobtl.Comm) error {
		var mine bytes.Buffer
		err := BW(cm, BWOptions{Size: 8, Windows: []int{3, 1}, Iters: 5, Warmup: 1, Blocking: true}, &mine)
		if cm.Rank() != 0 && mine.Len() > 0 {
			t.Errorf("rank %d printed %q", cm.Rank(), mine.String())
		}
		mu.Lock()
		out.Write(mine.Bytes())
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows []BWRow
	for sc := bufio.NewScanner(&out); sc.Scan(); {
		var r BWRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 2 || rows[0].Window != 3 || rows[1].Window != 1 {
		t.Fatalf("rows %+v, want windows 3 and 1", rows)
	}
	for _, r := range rows {
		moved := int64(8 * r.Window * 5)
		if s, got := r.Sender["pml.bytes_sent"], r.Receiver["pml.bytes_recv"]; s != moved || got != moved || r.MBps <= 0 {
			t.Errorf("window %d: %d bytes sent and %d received, %.3f MB/s; want %d", r.Window, s, got, r.MBps, moved)
		}
	}
}

// TestParsePatternCountsPerConnection: the per-connection numbers come
// from each rank's per-peer counters; pairs that carried nothing are no
// connection.
func TestParsePatternCountsPerConnection(t *testing.T) {
	raw := `{"bench":"lu","rows":[{"size":0,"time_us":1234.5,"msgs":30}],"rank_counters":[
	 {"ib.ib0.frames.peer1":20,"ib.ib0.credit_messages.peer1":0,"ib.ib0.posted_max.peer1":{"value":3,"max":3}},
	 {"ib.ib0.frames.peer0":10,"ib.ib0.credit_messages.peer0":4,"ib.ib0.posted_max.peer0":{"value":9,"max":9},"pml.sent":5},
	 {"ib.ib0.posted_max.peer0":{"value":1,"max":1}}]}`
	r, err := ParsePattern([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := []Conn{{From: 0, To: 1, Frames: 20, ECM: 0, PostedMost: 9}, {From: 1, To: 0, Frames: 10, ECM: 4, PostedMost: 3}}
	if r.TimeUS != 1234.5 || len(r.Conns) != 2 || r.Conns[0] != want[0] || r.Conns[1] != want[1] {
		t.Fatalf("got %+v, want time 1234.5 and %+v", r, want)
	}
	avg, most := r.perConn(func(c Conn) int64 { return c.ECM })
	if avg != 2 || most != 4 {
		t.Fatalf("ECM per connection: avg %v max %d, want 2 and 4", avg, most)
	}
	if _, err := ParsePattern([]byte(`{"rows":[]}`)); err == nil {
		t.Fatal("a report without rows parsed")
	}
}
