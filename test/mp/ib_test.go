// The ib BTL between processes: every protocol over softrc, a rank
// killed mid-job, and a job whose two ranks live in two network
// namespaces joined by a veth pair — two "hosts" the test makes itself.

package mp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// launch runs n ranks of this test binary in role over the stack, each
// under wrap, and returns everything they printed.
func launch(t *testing.T, n int, stackFile, role string, wrap ...string) (string, error) {
	t.Helper()
	res := mptest.Job{NP: n, Role: role, Stack: stackFile, Wrap: wrap, Timeout: 3 * time.Minute}.Run(t)
	var err error
	if res.Failed() {
		err = fmt.Errorf("the job ended with status %d", res.Status)
	}
	return res.Stdout + res.Stderr, err
}

// ring sends every size around the ring, all at once, and checks what
// arrives.
func ring(c *gobtl.Comm) error {
	me, n := c.Rank(), c.Size()
	next, prev := (me+1)%n, (me+n-1)%n
	sizes := []int{0, 1, 8, 200, 4096, 12 << 10, 12<<10 + 1, 70000, 1 << 20, 4<<20 + 3}
	for round := 0; round < 3; round++ {
		var rs []*gobtl.Request
		bufs := make([][]byte, len(sizes))
		for i, sz := range sizes {
			bufs[i] = make([]byte, sz)
			r, err := c.Irecv(bufs[i], prev, round*100+i)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		for i, sz := range sizes {
			s, err := c.Isend(msgtest.Fill(make([]byte, sz), uint64(me*1000+round*100+i)), next, round*100+i)
			if err != nil {
				return err
			}
			rs = append(rs, s)
		}
		if err := c.Waitall(rs, nil); err != nil {
			return err
		}
		for i := range sizes {
			if err := msgtest.Check(bufs[i], uint64(prev*1000+round*100+i)); err != nil {
				return fmt.Errorf("round %d: message %d from rank %d: %w", round, i, prev, err)
			}
		}
	}
	return c.Barrier()
}

func ringRole(c *gobtl.Comm) int {
	if err := ring(c); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", c.Rank(), err)
		return 1
	}
	var wire int64
	for k, v := range c.Metrics().Snapshot() {
		if g, ok := v.(map[string]int64); ok && strings.HasSuffix(k, ".wire_bytes_sent") {
			wire += g["value"]
		}
	}
	fmt.Printf("rank %d ok: %d wire bytes sent\n", c.Rank(), wire)
	return 0
}

func TestEveryProtocolBetweenProcessesOverSoftrc(t *testing.T) {
	for _, proto := range []string{"rdma_read", "rdma_write", "rdma_read_async", "pipeline"} {
		t.Run(proto, func(t *testing.T) {
			out, err := launch(t, 3, stackFile(t, proto, "ib", nil), "ring")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if strings.Count(out, " ok: ") != 3 {
				t.Fatalf("not every rank finished:\n%s", out)
			}
		})
	}
}

func TestAKilledRankIsALostPeerToTheOthers(t *testing.T) {
	out, _ := launch(t, 3, stackFile(t, "rdma_read", "ib", nil), "peer-death")
	for _, r := range []string{"rank 0", "rank 2"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, r+": receive from the killed rank 1 ended") {
				line = l
			}
		}
		// The launcher's notice (it reaps rank 1) or ib's own detection
		// (the connection goes down), whichever comes first.
		if !strings.Contains(line, "peer lost true") || !strings.Contains(line, "peer 1") && !strings.Contains(line, "rank 1 (pid") {
			t.Fatalf("%s's receive did not fail with ErrPeerLost naming peer 1:\n%s", r, out)
		}
		t.Log(line)
	}
}

// TestTwoNetworkNamespacesAreTwoHosts joins two namespaces with a veth
// pair, names the interface gb0 in both, and runs one rank in each with
// the port listening on gb0: the traffic crosses the veth, as between two
// hosts.
func TestTwoNetworkNamespacesAreTwoHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making network namespaces needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command (iproute2) is not installed")
	}
	ns := []string{fmt.Sprintf("gbib%d-0", os.Getpid()), fmt.Sprintf("gbib%d-1", os.Getpid())}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, n := range ns {
		ip("netns", "add", n)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n).Run() })
	}
	a, b := fmt.Sprintf("gbv%da", os.Getpid()%100000), fmt.Sprintf("gbv%db", os.Getpid()%100000)
	ip("link", "add", a, "type", "veth", "peer", "name", b)
	for i, dev := range []string{a, b} {
		ip("link", "set", dev, "netns", ns[i])
		ip("-n", ns[i], "link", "set", dev, "name", "gb0")
		ip("-n", ns[i], "addr", "add", fmt.Sprintf("10.77.%d.%d/24", os.Getpid()%200, i+1), "dev", "gb0")
		ip("-n", ns[i], "link", "set", "gb0", "up")
		ip("-n", ns[i], "link", "set", "lo", "up")
	}
	st := stackFile(t, "rdma_read", "ib", map[string]string{"address": "gb0"})
	// Each rank enters its namespace: rank r runs in ns[r].
	wrap := []string{"/bin/sh", "-c", `exec ip netns exec "$(eval echo \$GBIB_NS$GOBTL_RANK)" "$0"`}
	os.Setenv("GBIB_NS0", ns[0])
	os.Setenv("GBIB_NS1", ns[1])
	defer os.Unsetenv("GBIB_NS0")
	defer os.Unsetenv("GBIB_NS1")
	out, err := launch(t, 2, st, "ring", wrap...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Count(out, " ok: ") != 2 {
		t.Fatalf("not every rank finished:\n%s", out)
	}
	// The bytes crossed the veth: its counters in the first namespace.
	js, err := exec.Command("ip", "-n", ns[0], "-j", "-s", "link", "show", "gb0").Output()
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Stats struct {
			RX struct{ Bytes int64 } `json:"rx"`
			TX struct{ Bytes int64 } `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(js, &links); err != nil || len(links) != 1 {
		t.Fatalf("gb0 statistics %q: %v", js, err)
	}
	t.Logf("%s\ngb0 in %s: %d bytes in, %d out", out, ns[0], links[0].Stats.RX.Bytes, links[0].Stats.TX.Bytes)
	// Three rounds of ~5.2 MB each way went over the veth.
	if links[0].Stats.RX.Bytes < 15<<20 || links[0].Stats.TX.Bytes < 15<<20 {
		t.Fatalf("gb0 carried %d/%d bytes: the traffic did not cross the veth", links[0].Stats.RX.Bytes, links[0].Stats.TX.Bytes)
	}
}
