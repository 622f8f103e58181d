package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
)

// TestTheInfiniBandSchemesRunAsPlugins runs a one-way stream of small
// messages — the case that needs flow control — over ib/softrc with each
// of seed 000's three schemes served by its plugin, on one buffer per
// peer, and checks the scheme did its work: the hardware scheme was held
// back by RNR NAKs, the static scheme sent explicit credit frames, and the
// dynamic scheme grew the sender's buffers past the one it started with.
func TestTheInfiniBandSchemesRunAsPlugins(t *testing.T) {
	for _, s := range ibSchemes {
		for _, sel := range []string{
			fmt.Sprintf("builtin = %q", s.name),
			fmt.Sprintf("plugin = %q\n  plugin_dir = %q", s.name, builtinDir),
		} {
			t.Run(s.name+"/"+strings.Fields(sel)[0], func(t *testing.T) {
				path := writeIBStack(t, sel, s.body)
				err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{path}}, func(cm *gobtl.Comm) error {
					return streamUntilItActs(cm, s)
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// ibScheme is one of seed 000's schemes: its policy's name and
// parameters, and the metric of rank 1, the receiver, that shows it
// acting, with the least value that does.
type ibScheme struct {
	name, body string
	metric     string
	least      int64
}

// ibSchemes: the hardware scheme's RNR NAKs, the static scheme's explicit
// credit frames, the dynamic scheme's buffers grown past the one it
// started with.
var ibSchemes = []ibScheme{
	{"ib_hardware", "pre_post = 1", "ib.softrc0.rnr_naks_sent", 1},
	{"ib_static", "pre_post = 1\n  credit_threshold = 1\n  rndv_on_no_credit = false", "ib.rail0.credit_messages.peer0", 1},
	{"ib_dynamic", "initial = 1\n  max = 16", "ib.rail0.posted_max.peer0", 2},
}

// writeIBStack writes a stack of one softrc rail with one 2 KiB buffer
// per peer and the flow_control policy that sel selects, with the
// parameters of body, and returns its path.
func writeIBStack(t *testing.T, sel, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stack.hcl")
	src := fmt.Sprintf(`job {
  log { level = "error" }
}
btl "self" "self" {}
btl "ib" "rail0" {
  provider      = "softrc"
  address       = "127.0.0.1"
  eager_limit   = "2016B"
  min_rnr_timer = "10us"
}
policy "recvbuf" {
  builtin        = "perpeer"
  receive_queues = "P,2048,4,1,1"
}
policy "flow_control" {
  %s
  %s
}
`, sel, body)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// streamUntilItActs streams in rounds until rank 1 sees the scheme act,
// for at most 200 rounds. A plugin's decisions arrive late (core: "policy
// proposes, mechanism disposes"), later still while the ranks keep both
// cores busy.
func streamUntilItActs(cm *gobtl.Comm, s ibScheme) error {
	done := make([]byte, 1)
	for round := 0; ; round++ {
		if err := stream(cm, 100, 64); err != nil {
			return err
		}
		if cm.Rank() == 1 {
			snap := cm.Metrics().Snapshot()
			v, ok := snap[s.metric]
			if !ok {
				return fmt.Errorf("no metric %s", s.metric)
			}
			done[0] = 0
			if metricValue(v) >= s.least {
				done[0] = 1
			} else if round == 199 {
				return didNotAct(s, snap, round+1)
			}
		}
		if err := cm.Bcast(done, 1); err != nil {
			return err
		}
		if done[0] == 1 {
			return nil
		}
	}
}

// didNotAct says that the scheme's metric stayed low after rounds, with
// the receiver's per-peer, RNR and plugin metrics.
func didNotAct(s ibScheme, snap map[string]any, rounds int) error {
	var all []string
	for k, v := range snap {
		if strings.Contains(k, "peer0") || strings.Contains(k, "rnr") || strings.Contains(k, "plugin") {
			all = append(all, fmt.Sprintf("%s=%v", k, v))
		}
	}
	slices.Sort(all)
	return fmt.Errorf("%s = %v after %d rounds, want at least %d: the scheme did not act\n%s", s.metric, snap[s.metric], rounds, s.least, strings.Join(all, "\n"))
}

// stream sends n messages of size bytes from rank 0 to rank 1 without
// waiting for each, the receiver posting its receives late: one-way
// traffic that runs a receiver out of buffers.
func stream(c *gobtl.Comm, n, size int) error {
	buf := make([]byte, size)
	switch c.Rank() {
	case 0:
		for i := range n {
			buf[0] = byte(i)
			if err := c.Send(buf, 1, i); err != nil {
				return fmt.Errorf("send %d: %w", i, err)
			}
		}
	case 1:
		for i := range n {
			st, err := c.Recv(buf, 0, i)
			if err != nil {
				return fmt.Errorf("recv %d: %w", i, err)
			}
			if st.Count != size || buf[0] != byte(i) {
				return fmt.Errorf("message %d: %d bytes starting %d", i, st.Count, buf[0])
			}
		}
	}
	return c.Barrier()
}

// metricValue is a counter's value or a gauge's current one.
func metricValue(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case map[string]int64:
		return v["value"]
	}
	return -1
}
