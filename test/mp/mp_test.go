// Package mp holds the multi-process tests: real ranks started by the
// launcher (internal/mptest: the test binary doubles as the rank
// program), exchanging messages through the PML over btl/sm and over
// btl/ib on softrc, and the gobtl command's own `gobtl run` and `gobtl
// bench`.
package mp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
	"github.com/gobtl/gobtl/pml"
)

func TestMain(m *testing.M) {
	mptest.Main(m, map[string]func() int{
		"exchange":   rank(exchangeRole),
		"peer-death": rank(peerDeath),
		"sigkill":    rank(sigkill),
		"ring":       rank(ringRole),
		"hold":       rank(hold),
		"leave":      leaveRole,
		"panic":      panicRole,
		"error":      errorRole,
		"mismatch":   rank(mismatchRole),
	}, nil)
}

// openComm is how a rank program starts: the same call every gobtl
// program makes; the stack comes from `gobtl run -c`.
func openComm() (*gobtl.Comm, error) { return gobtl.Init(context.Background(), gobtl.Options{}) }

// counter sums the counters whose names end in "."+name (one per module
// instance: sm.<instance>.cma_gets).
func counter(m *core.Metrics, name string) int64 {
	var n int64
	for k, v := range m.Snapshot() {
		if strings.HasSuffix(k, "."+name) {
			if c, ok := v.(int64); ok {
				n += c
			}
		}
	}
	return n
}

// stackFile writes a stack for one test: the PML protocol and one btl
// block of kind with params: "sm", or "ib" (one softrc rail, beside self,
// with a stall bound).
func stackFile(t *testing.T, protocol, kind string, params map[string]string) string {
	t.Helper()
	var b strings.Builder
	if kind == "ib" {
		fmt.Fprintf(&b, "job {\n  protocol = %q\n  stall_timeout = \"60s\"\n}\nbtl \"self\" \"self\" {}\nbtl \"ib\" \"rail0\" {\n", protocol)
	} else {
		fmt.Fprintf(&b, "job {\n  protocol = %q\n}\nbtl %q %q {\n", protocol, kind, kind)
	}
	for k, v := range params {
		fmt.Fprintf(&b, "  %s = %q\n", k, v)
	}
	b.WriteString("}\n")
	path := filepath.Join(t.TempDir(), "stack.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// msgSize picks a size from 0 B to max, spread evenly over the powers of
// two so that every protocol sees traffic: eager, fragments, rendezvous.
func msgSize(rng *rand.Rand, max int) int {
	if rng.IntN(20) == 0 {
		return 0
	}
	bits := rng.Float64() * float64(63-leadingZeros(uint64(max)))
	return min(max, int(float64(uint64(1)<<uint(bits))*(1+rng.Float64())))
}

func leadingZeros(x uint64) int {
	n := 0
	for i := 63; i >= 0 && x&(1<<uint(i)) == 0; i-- {
		n++
	}
	return n
}

func seedOf(src, dst, k int) uint64 { return uint64(src)<<40 | uint64(dst)<<20 | uint64(k) }

// rank is a role of the test binary: a rank of a job that opens its
// communicator as every gobtl program does and announces its job (the
// tests find its /dev/shm files by it).
func rank(role func(c *gobtl.Comm) int) func() int {
	return func() int {
		c, err := openComm()
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			return 2
		}
		defer c.Close()
		fmt.Fprintf(os.Stderr, "job %s rank %d pid %d\n", os.Getenv(boot.EnvJobID), c.Rank(), os.Getpid())
		return role(c)
	}
}

func exchangeRole(c *gobtl.Comm) int {
	if err := exchange(c); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", c.Rank(), err)
		return 1
	}
	return 0
}

// peerDeath: rank 1 dies while the others wait for a message from it;
// they outlive the launcher's SIGTERM long enough to see their receive
// fail with ErrPeerLost (sm notices through rank 1's pidfd, ib through
// its connections).
func peerDeath(c *gobtl.Comm) int {
	signal.Ignore(syscall.SIGTERM)
	if err := c.Barrier(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: barrier: %v\n", c.Rank(), err)
		return 3
	}
	// Rank 1 dies only once every other rank has told it that it left the
	// barrier: a rank that leaves a barrier may still owe the others a
	// message in flight, which its death could take with it — then a
	// survivor's barrier, not its receive, would see the loss.
	if c.Rank() == 1 {
		for r := range c.Size() {
			if r == 1 {
				continue
			}
			if _, err := c.Recv(make([]byte, 1), r, 1); err != nil {
				fmt.Fprintf(os.Stderr, "rank 1: receive from %d: %v\n", r, err)
				return 3
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if err := c.Send([]byte{1}, 1, 1); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: send to 1: %v\n", c.Rank(), err)
		return 3
	}
	start := time.Now()
	_, err := c.Recv(make([]byte, 8), 1, 0)
	fmt.Printf("rank %d: receive from the killed rank 1 ended after %v: peer lost %v: %v\n",
		c.Rank(), time.Since(start).Round(time.Millisecond), errors.Is(err, core.ErrPeerLost), err)
	return 0
}

// sigkill: a ring that never ends; rank 1 dies in the middle of it.
func sigkill(c *gobtl.Comm) int {
	buf := make([]byte, 64<<10)
	for i := 0; ; i++ {
		if c.Rank() == 1 && i == 200 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		r, _ := c.Irecv(buf, prev, 0)
		if err := c.Send(buf[:1000+i%(60<<10)], next, 0); err != nil {
			fmt.Fprintln(os.Stderr, "send:", err)
			return 3
		}
		if _, err := c.Wait(r); err != nil {
			fmt.Fprintln(os.Stderr, "recv:", err)
			return 3
		}
	}
}

// exchange runs the phases named by MPTEST_PHASES on every rank and checks
// every byte that arrives.
// exchange moves checked messages of random sizes in three phases — all
// pairs at once, thousands in flight around the ring, a token ring of
// blocking calls taking any source — and prints what this rank received.
func exchange(c *gobtl.Comm) error {
	x := &exchanger{c: c, me: c.Rank(), n: c.Size(), maxSize: envInt("MPTEST_MAX", 8<<20)}
	if err := x.allPairs(envInt("MPTEST_ROUNDS", 20)); err != nil {
		return err
	}
	if err := x.ringInFlight(envInt("MPTEST_INFLIGHT", 2000)); err != nil {
		return err
	}
	if err := x.tokenRing(envInt("MPTEST_TOKENS", 30)); err != nil {
		return err
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	m := c.Metrics()
	fmt.Printf("rank %d: %d messages, %d bytes, crc32 %08x, cma_gets %d cma_puts %d rndv %d pipeline %d\n", x.me, x.msgs, x.bytes, x.crc,
		counter(m, "cma_gets"), counter(m, "cma_puts"), counter(m, "rndv_sends"), counter(m, "pipeline_sends"))
	return nil
}

// exchanger is one rank's side of exchange, with the count, bytes and
// checksum of what it received intact.
type exchanger struct {
	c       *gobtl.Comm
	me, n   int
	maxSize int
	crc     uint32
	msgs    int
	bytes   int
}

// check checks a message of size bytes filled from seed, and counts it.
func (x *exchanger) check(buf []byte, st pml.Status, seed uint64, size int, what string) error {
	if st.Count != size {
		return fmt.Errorf("%s: %d bytes arrived, %d sent", what, st.Count, size)
	}
	if err := msgtest.Check(buf[:size], seed); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	x.crc = crc32.Update(x.crc, crc32.IEEETable, buf[:size])
	x.msgs++
	x.bytes += size
	return nil
}

// size is the random size, up to maxSize, of message k from src to dst.
func (x *exchanger) size(src, dst, k int) int {
	return msgSize(rand.New(rand.NewPCG(seedOf(src, dst, k), 7)), x.maxSize)
}

// allPairs is phase 1: every rank sends rounds messages of random size to
// every other rank, all posted before any wait.
func (x *exchanger) allPairs(rounds int) error {
	c, me := x.c, x.me
	var reqs []*pml.Request
	recvBufs := map[[2]int][]byte{}
	for k := range rounds {
		for p := range x.n {
			if p == me {
				continue
			}
			b := make([]byte, x.size(p, me, k))
			recvBufs[[2]int{p, k}] = b
			r, err := c.Irecv(b, p, k)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	for k := range rounds {
		for p := range x.n {
			if p == me {
				continue
			}
			r, err := c.Isend(msgtest.Fill(make([]byte, x.size(me, p, k)), seedOf(me, p, k)), p, k)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	if err := c.Waitall(reqs, nil); err != nil {
		return fmt.Errorf("all-pairs: %w", err)
	}
	for key, b := range recvBufs {
		st := pml.Status{Count: len(b)}
		if err := x.check(b, st, seedOf(key[0], me, key[1]), x.size(key[0], me, key[1]), fmt.Sprintf("all-pairs from %d round %d", key[0], key[1])); err != nil {
			return err
		}
	}
	return nil
}

// ringInFlight is phase 2: inflight small and medium messages around the
// ring, all posted before any wait.
func (x *exchanger) ringInFlight(inflight int) error {
	c, me := x.c, x.me
	next, prev := (me+1)%x.n, (me+x.n-1)%x.n
	small := func(src, k int) int {
		return msgSize(rand.New(rand.NewPCG(seedOf(src, 0, k), 9)), 64<<10)
	}
	reqs := make([]*pml.Request, 0, 2*inflight)
	rb := make([][]byte, inflight)
	for k := range inflight {
		rb[k] = make([]byte, small(prev, k))
		r, err := c.Irecv(rb[k], prev, 1<<20+k)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	for k := range inflight {
		r, err := c.Isend(msgtest.Fill(make([]byte, small(me, k)), seedOf(me, 0, k)), next, 1<<20+k)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	if err := c.Waitall(reqs, nil); err != nil {
		return fmt.Errorf("ring in flight: %w", err)
	}
	for k := range inflight {
		if err := x.check(rb[k], pml.Status{Count: len(rb[k])}, seedOf(prev, 0, k), small(prev, k), fmt.Sprintf("ring message %d", k)); err != nil {
			return err
		}
	}
	return nil
}

// tokenRing is phase 3: tokens of random sizes passed around the ring
// with blocking calls, the receiver taking any source.
func (x *exchanger) tokenRing(tokens int) error {
	c, me := x.c, x.me
	next, prev := (me+1)%x.n, (me+x.n-1)%x.n
	buf := make([]byte, x.maxSize)
	for k := range tokens {
		sz := x.size(0, 0, 1000+k)
		if me == 0 {
			if err := c.Send(msgtest.Fill(make([]byte, sz), uint64(k)), next, 7); err != nil {
				return err
			}
		}
		st, err := c.Recv(buf, pml.AnySource, 7)
		if err != nil {
			return fmt.Errorf("token %d: %w", k, err)
		}
		if st.Source != prev {
			return fmt.Errorf("token %d came from %d, not %d", k, st.Source, prev)
		}
		if err := x.check(buf, st, uint64(k), sz, fmt.Sprintf("token %d", k)); err != nil {
			return err
		}
		if me != 0 {
			if err := c.Send(buf[:sz], next, 7); err != nil {
				return err
			}
		}
	}
	return nil
}

var counterRE = regexp.MustCompile(`(cma_gets|cma_puts|rndv|pipeline) (\d+)`) // as exchange prints them

var jobLine = regexp.MustCompile(`job ([0-9a-f]+) rank`)

// shmLeft lists the job's files left in /dev/shm.
func shmLeft(stderr string) []string {
	m := jobLine.FindStringSubmatch(stderr)
	if m == nil {
		return nil
	}
	left, _ := filepath.Glob(filepath.Join("/dev/shm", boot.ShmPrefix(m[1])+"*"))
	return left
}

func TestExchangesAcrossProtocolsAndSingleCopyMechanisms(t *testing.T) {
	type stack struct{ protocol, singleCopy string }
	stacks := []stack{
		{"rdma_read", "cma"}, {"rdma_write", "cma"}, {"rdma_read_async", "cma"}, {"pipeline", "cma"},
		{"rdma_read", "none"}, // no RDMA: the PML falls back to the pipeline
	}
	for _, np := range []int{2, 4} {
		for _, s := range stacks {
			t.Run(fmt.Sprintf("np%d/%s/%s", np, s.protocol, s.singleCopy), func(t *testing.T) {
				var env []string
				if testing.Short() {
					env = append(env, "MPTEST_ROUNDS=4", "MPTEST_INFLIGHT=300", "MPTEST_TOKENS=8")
				}
				params := map[string]string{"single_copy": s.singleCopy}
				if s.singleCopy == "cma" {
					// CMA for every rendezvous (above the 4 KiB eager
					// limit) whatever is in flight, the window of
					// single_copy_min/max, so that the protocol alone
					// carries the large messages; sm's default table sends
					// queued ones through the pipeline.
					params["single_copy_min"] = "4KiB"
				}
				stack := stackFile(t, s.protocol, "sm", params)
				res := mptest.Job{NP: np, Role: "exchange", Stack: stack, Env: env}.Run(t)
				if res.Failed() {
					t.Fatalf("the job failed:\n%s", res)
				}
				out, errOut, took := res.Stdout, res.Stderr, res.Took
				if c := strings.Count(out, "messages,"); c != np {
					t.Fatalf("%d of %d ranks reported:\n%s", c, np, out)
				}
				// The counters say which path carried the large messages.
				sum := map[string]int{}
				for _, m := range counterRE.FindAllStringSubmatch(out, -1) {
					n, _ := strconv.Atoi(m[2])
					sum[m[1]] += n
				}
				want := map[string]bool{ // counter -> must be non-zero
					"cma_gets": s.singleCopy == "cma" && strings.HasPrefix(s.protocol, "rdma_read"),
					"cma_puts": s.singleCopy == "cma" && s.protocol == "rdma_write",
					"rndv":     s.singleCopy == "cma" && s.protocol != "pipeline",
					"pipeline": s.singleCopy == "none" || s.protocol == "pipeline",
				}
				for c, nonzero := range want {
					if (sum[c] > 0) != nonzero {
						t.Errorf("%s = %d over the ranks, want it %s", c, sum[c], map[bool]string{true: "non-zero", false: "zero"}[nonzero])
					}
				}
				if left := shmLeft(errOut); len(left) > 0 {
					t.Errorf("left in /dev/shm: %v", left)
				}
				t.Logf("%v\n%s", took, out)
			})
		}
	}
}

func TestAKilledRankStopsTheJobNamesItAndLeavesNoSegments(t *testing.T) {
	for _, np := range []int{2, 4} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			// Through the command: its exit status is the test's too.
			res := mptest.Job{NP: np, Role: "sigkill", Command: true}.Run(t)
			if !res.Failed() {
				t.Fatalf("gobtl run exited with status 0\n%s", res)
			}
			errOut, took := res.Stderr, res.Took
			if !strings.Contains(errOut, "gobtl run: rank 1 (pid") || !strings.Contains(errOut, "killed by signal 9") {
				t.Errorf("the launcher does not name rank 1 and SIGKILL:\n%s", errOut)
			}
			if took > 5*time.Second {
				t.Errorf("the job took %v to stop", took)
			}
			if left := shmLeft(errOut); len(left) > 0 {
				t.Errorf("left in /dev/shm: %v", left)
			}
			if jobLine.FindStringSubmatch(errOut) == nil {
				t.Errorf("no rank announced its job:\n%s", errOut)
			}
			t.Logf("stopped after %v, status %d", took, res.Status)
		})
	}
}

func TestSurvivorsSeeADeadPeerAsLost(t *testing.T) {
	stack := stackFile(t, "rdma_read", "sm", map[string]string{"liveness_interval": "20ms"})
	res := mptest.Job{NP: 2, Role: "peer-death", Stack: stack}.Run(t)
	out, errOut := res.Stdout, res.Stderr
	if !res.Failed() {
		t.Fatalf("the job succeeded although rank 1 died\n%s", res)
	}
	if !strings.Contains(out, "rank 0: receive from the killed rank 1 ended") || !strings.Contains(out, "peer lost true") {
		t.Fatalf("rank 0 did not see rank 1 lost:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	t.Log(strings.TrimSpace(out))
}

func TestBenchmarksPrintValidJSON(t *testing.T) {
	cases := []struct {
		name, sizes string
		np          int
		fields      []string
	}{
		{"latency", "0,8,1MiB", 2, []string{"lat_us"}},
		{"bw", "8,64KiB", 2, []string{"mbps"}},
		{"bibw", "8,64KiB", 2, []string{"mbps"}},
		{"msgrate", "8", 2, []string{"msgs_per_s", "mbps"}},
		{"overlap", "64KiB,1MiB", 2, []string{"overlap_send", "overlap_recv"}},
		{"alltoall", "8,4KiB", 4, []string{"lat_us", "lat_min_us", "lat_max_us"}},
		{"allreduce", "8,64KiB", 3, []string{"lat_us", "lat_min_us", "lat_max_us"}},
		{"reduce", "8,64KiB", 3, []string{"lat_us"}},
		{"bcast", "8,64KiB", 3, []string{"lat_us"}},
		{"allgather", "8,64KiB", 3, []string{"lat_us"}},
		{"barrier", "0", 3, []string{"lat_us"}},
		{"multi-pingpong", "8,2KiB", 4, []string{"lat_us", "lat_max_us"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gobtl := mptest.Gobtl(t)
			cmd := exec.Command(gobtl, "run", "-np", strconv.Itoa(tc.np), "--timeout", "60s", "--",
				gobtl, "bench", tc.name, "--json", "--sizes", tc.sizes, "--iters", "20", "--warmup", "2")
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, o.String(), e.String())
			}
			var rep struct {
				Bench        string                       `json:"bench"`
				Ranks        int                          `json:"ranks"`
				Version      string                       `json:"version"`
				Host         string                       `json:"host"`
				Time         string                       `json:"time"`
				Config       map[string]any               `json:"config"`
				Rows         []map[string]json.RawMessage `json:"rows"`
				Counters     map[string]any               `json:"counters"`
				RankCounters []map[string]any             `json:"rank_counters"`
			}
			dec := json.NewDecoder(&o)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("not one JSON report: %v\n%s", err, o.String())
			}
			if dec.More() {
				t.Fatalf("more than one JSON value on stdout:\n%s", o.String())
			}
			sizes := strings.Split(tc.sizes, ",")
			if rep.Bench != tc.name || rep.Ranks != tc.np || len(rep.Rows) != len(sizes) || rep.Config == nil || len(rep.Counters) == 0 ||
				len(rep.RankCounters) != tc.np || rep.Version == "" || rep.Host == "" || rep.Time == "" {
				t.Fatalf("report %+v", rep)
			}
			for _, row := range rep.Rows {
				if _, ok := row["size"]; !ok {
					t.Errorf("row without size: %v", row)
				}
				for _, f := range tc.fields {
					var v float64
					if err := json.Unmarshal(row[f], &v); err != nil || !(v > 0) {
						t.Errorf("row %v: field %s = %s", row["size"], f, row[f])
					}
				}
			}
		})
	}
}
