package simjob

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/conf"
)

func load(t *testing.T) *conf.Config {
	t.Helper()
	c, diags := conf.Load(conf.Options{}, "../../conf/examples/sim.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return c
}

func TestARunIsDeterministic(t *testing.T) {
	var out [2]bytes.Buffer
	for i := range out {
		r, err := Run(context.Background(), Config{Ranks: 8, Stack: load(t), Pattern: "lu", Iters: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WriteJSON(&out[i]); err != nil {
			t.Fatal(err)
		}
		if r.Msgs == 0 || r.Frames < r.Msgs {
			t.Fatalf("run %d: %d messages in %d frames", i, r.Msgs, r.Frames)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Fatalf("two runs differ:\n%s\n---\n%s", out[0].String(), out[1].String())
	}

}

func TestAStackWithARealDeviceIsRefused(t *testing.T) {
	c, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "real.hcl", Bytes: []byte(`btl "ib" "rail0" { provider = "softrc" }`)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := Run(context.Background(), Config{Ranks: 2, Stack: c, Pattern: "lu"}); err == nil || !strings.Contains(err.Error(), "not simulated") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

func TestTheOSUBenchmarksRunInVirtualTime(t *testing.T) {
	for _, b := range []string{"latency", "multi-pingpong", "allreduce"} {
		var out [2]bytes.Buffer
		for i := range out {
			r, err := Run(context.Background(), Config{Ranks: 4, Stack: load(t), Pattern: b, Sizes: []int{8, 2048}, Iters: 20})
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			r.WriteText(&out[i])
			if r.Frames == 0 || !strings.Contains(out[i].String(), "size 2048") {
				t.Fatalf("%s: %d frames, report:\n%s", b, r.Frames, out[i].String())
			}
		}
		if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
			t.Fatalf("%s: two runs differ:\n%s\n---\n%s", b, out[0].String(), out[1].String())
		}
	}
}

// Under seed 000's dynamic scheme from one buffer per peer, frames meet
// receive queues that are momentarily empty and wait out RNR retries. A
// rank leaving the finalize barrier used to say goodbye while its last
// barrier frame was in such a retry: the goodbye (a datagram) overtook
// the frame, the peer moved the QP to ERR, the frame was lost and the
// peer's barrier waited forever (CG at 64 ranks: 6 ranks stalled).
func TestAGoodbyeNeverOvertakesAFrameInRNRRetry(t *testing.T) {
	src := strings.Replace(string(must(os.ReadFile("../../conf/examples/sim.hcl"))), "initial           = 2", "initial           = 1", 1)
	if !strings.Contains(src, "initial           = 1") {
		t.Fatal("conf/examples/sim.hcl no longer sets initial = 2; update the test")
	}
	c, diags := conf.LoadSources(conf.Options{}, conf.Source{Name: "dynamic-from-one.hcl", Bytes: []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	r, err := Run(context.Background(), Config{Ranks: 64, Stack: c, Pattern: "cg"})
	if err != nil {
		t.Fatal(err)
	}
	if r.RNRNaks == 0 {
		t.Fatal("no RNR NAK in the run: the test no longer reaches the race it is for")
	}
	if r.FinalizeFailed > 0 {
		t.Fatalf("finalize failed on %d ranks (%d RNR NAKs in the run): %s", r.FinalizeFailed, r.RNRNaks, r.FinalizeError)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
