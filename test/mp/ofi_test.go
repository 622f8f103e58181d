//go:build ofi && cgo

// The ofi BTL between processes (build tag ofi): the exchange's stress
// patterns with every rendezvous protocol over the tcp and shm providers,
// and a rank killed mid-job.

package mp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtl/gobtl/btl/ofi"
	"github.com/gobtl/gobtl/internal/mptest"
)

// ofiStack writes a stack of self and one ofi block over provider.
func ofiStack(t *testing.T, protocol, provider string, params map[string]string) string {
	t.Helper()
	if ps, err := ofi.Providers(provider); err != nil || len(ps) == 0 {
		t.Skipf("libfabric has no %s provider here (%v)", provider, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "job {\n  protocol = %q\n  stall_timeout = \"60s\"\n}\nbtl \"self\" \"self\" {}\nbtl \"ofi\" \"net\" {\n  provider = %q\n", protocol, provider)
	for k, v := range params {
		fmt.Fprintf(&b, "  %s = %s\n", k, v)
	}
	b.WriteString("}\n")
	path := filepath.Join(t.TempDir(), "stack.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOFIExchangesEveryProtocol runs the exchange — all pairs of random
// sizes from 0 B to 8 MiB, thousands in flight around the ring, a token
// ring received from any source, every message checked and summed into a
// CRC — over ofi with each rendezvous protocol.
func TestOFIExchangesEveryProtocol(t *testing.T) {
	for _, prov := range []string{"tcp", "shm"} {
		for _, np := range []int{2, 4} {
			for _, proto := range []string{"rdma_write", "rdma_read", "rdma_read_async"} {
				t.Run(fmt.Sprintf("%s/np%d/%s", prov, np, proto), func(t *testing.T) {
					env := []string{"MPTEST_ROUNDS=4", "MPTEST_INFLIGHT=300", "MPTEST_TOKENS=8"}
					res := mptest.Job{NP: np, Role: "exchange", Stack: ofiStack(t, proto, prov, nil), Env: env}.Run(t)
					if res.Failed() {
						t.Fatalf("the job failed:\n%s", res)
					}
					if c := strings.Count(res.Stdout, "messages,"); c != np {
						t.Fatalf("%d of %d ranks reported:\n%s", c, np, res.Stdout)
					}
					if !strings.Contains(res.Stdout, "rndv ") || strings.Contains(res.Stdout, "rndv 0 ") && np == 2 {
						t.Errorf("no rendezvous went over ofi:\n%s", res.Stdout)
					}
					t.Logf("%v\n%s", res.Took, res.Stdout)
				})
			}
		}
	}
}

// TestOFIPeerKilledIsLost: rank 1 dies while the others wait for a
// message from it; their receive fails with ErrPeerLost.
func TestOFIPeerKilledIsLost(t *testing.T) {
	for _, prov := range []string{"tcp", "shm"} {
		t.Run(prov, func(t *testing.T) {
			res := mptest.Job{NP: 3, Role: "peer-death", Stack: ofiStack(t, "rdma_read", prov, nil)}.Run(t)
			for _, r := range []string{"rank 0", "rank 2"} {
				if !strings.Contains(res.Stdout, r+": receive from the killed rank 1 ended") {
					t.Fatalf("%s did not report:\n%s", r, res)
				}
			}
			if strings.Count(res.Stdout, "peer lost true") != 2 {
				t.Fatalf("a survivor's receive did not fail with ErrPeerLost:\n%s", res)
			}
			t.Log(strings.TrimSpace(res.Stdout))
		})
	}
}
