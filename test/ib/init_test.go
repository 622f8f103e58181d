package ib

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/layers"
)

// TestTheExampleStackRunsThroughInit opens conf/examples/ib.hcl the way
// every program does, with the ranks as goroutines (each on its own
// softrc host).
func TestTheExampleStackRunsThroughInit(t *testing.T) {
	err := gobtl.RunLocal(context.Background(), 3, gobtl.Options{ConfigFiles: []string{"../../conf/examples/ib.hcl"}}, func(c *gobtl.Comm) error {
		if len(c.Metrics().Names()) == 0 {
			return fmt.Errorf("no metrics")
		}
		return exchange(layers.PML(c), sizes, false)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetricsNameTheModuleAndTheQueues checks the counters the issue asks
// for are there.
func TestMetricsNameTheModuleAndTheQueues(t *testing.T) {
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{"../../conf/examples/ib.hcl"}}, func(c *gobtl.Comm) error {
		if err := exchange(layers.PML(c), []int{8, 300, 5000, 100000}, true); err != nil {
			return err
		}
		names := bytes.NewBufferString("")
		for _, n := range c.Metrics().Names() {
			fmt.Fprintln(names, n)
		}
		for _, want := range []string{
			"ib.rail0.recv_util.q0_160B", "ib.rail0.recv_util.q8_32768B", "ib.recv_registered_bytes",
			"ib.rail0.posted.peer", "ib.rail0.srq_limit_events.q1_256B", "ib.softrc0.rnr_naks_sent",
			"ib.softrc0.rnr_naks_received", "ib.softrc0.retries", "ib.softrc0.wire_bytes_sent", "ib.softrc0.reads_outstanding",
		} {
			if !bytes.Contains(names.Bytes(), []byte(want)) {
				return fmt.Errorf("no metric %s among\n%s", want, names)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
