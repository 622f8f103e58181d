package multirail

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/internal/mptest"
)

var pluginDir string

func TestMain(m *testing.M) {
	mptest.Main(m, nil, func() (cleanup func(), err error) {
		pluginDir, cleanup, err = mptest.BuildTemp("", "../../plugins/adaptive_striping")
		return cleanup, err
	})
}

// stackFrom writes conf/examples/<example> with its policy selection
// replaced.
func stackFrom(t *testing.T, example, builtin, sel string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "conf", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	old := fmt.Sprintf("builtin          = %q", builtin)
	if !strings.Contains(string(src), old) {
		t.Fatalf("%s does not select %s", example, old)
	}
	path := filepath.Join(t.TempDir(), example)
	if err := os.WriteFile(path, []byte(strings.Replace(string(src), old, sel, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAdaptiveStripingAsAPluginLearnsTheFasterRail runs the 4x+1x example
// (1GB/s and 250MB/s softrc rails) with adaptive striping served by its
// plugin (plugins/adaptive_striping, over gRPC): the receiver, which
// stripes the reads, moves weight to the faster rail without being told
// the rates.
func TestAdaptiveStripingAsAPluginLearnsTheFasterRail(t *testing.T) {
	stack := stackFrom(t, "ib-4x1x.hcl", "adaptive_striping",
		fmt.Sprintf("plugin           = \"adaptive_striping\"\n  plugin_dir       = %q", pluginDir))
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{stack}}, func(c *gobtl.Comm) error {
		buf := make([]byte, 1<<20)
		for i := 0; i < 20; i++ {
			var err error
			if c.Rank() == 0 {
				err = c.Send(buf, 1, 0)
			} else {
				_, err = c.Recv(buf, 0, 0)
			}
			if err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 1 {
			// Decisions of a plugin arrive in batches; the last ones
			// may be on their way, but many messages have been
			// measured.
			if w := layers.PML(c).Weights(0); !(w[0] > w[1]) {
				return fmt.Errorf("weights %v after 20 MiB: the 1GB/s rail does not lead the 250MB/s one", w)
			}
		}
		if n := c.Metrics().Counter("plugin.adaptive_striping.failures").Load(); n != 0 {
			return fmt.Errorf("%d plugin failures", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWeightedStripingWithStaticWeightsOpens: weights = [4, 1] are for
// the two rails; this rank's own channel (btl self) has one subchannel
// and must not make Init fail.
func TestWeightedStripingWithStaticWeightsOpens(t *testing.T) {
	stack := stackFrom(t, "ib-4x1x.hcl", "adaptive_striping", "builtin          = \"weighted_striping\"\n  weights          = [4, 1]")
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{stack}}, func(c *gobtl.Comm) error {
		if w := layers.PML(c).Weights(1 - c.Rank()); len(w) != 2 || w[0] != 80 || w[1] != 20 {
			return fmt.Errorf("weights %v, want 80:20", w)
		}
		return exchange(c, sizes)
	})
	if err != nil {
		t.Fatal(err)
	}
}
