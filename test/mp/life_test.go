// How a rank's end reaches the job (issue 30 items 5 and 8): a rank that
// leaves without Close — exit 0, a panic, an error returned past a
// deferred Close — fails the job, gobtl run names it, and its peers'
// operations on it fail with ErrPeerLost at once, over sm and over ib
// (softrc), also where they never connected to it.

package mp

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/mptest"
)

// Environment of the roles below.
const (
	envLeaveWait = "MPTEST_LEAVE_WAIT" // recv, any or barrier: what rank 0 is in
	envLeaveDir  = "MPTEST_LEAVE_DIR"  // where rank 0 says it has posted
)

// leaveRole: rank 1 exits 0 without Close once rank 0 is in the
// operation MPTEST_LEAVE_WAIT names — a receive from rank 1, a receive
// from any source, a barrier — and rank 0, which outlives the launcher's
// SIGTERM, prints how that operation ended, then how the others, tried
// after it, end. The two never exchange a message (but for the barrier's
// own): over ib they have no connection, and nothing but the launcher's
// notice tells rank 0 that rank 1 is gone. They meet through a file.
func leaveRole() int {
	signal.Ignore(syscall.SIGTERM)
	c, err := openComm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	posted := filepath.Join(os.Getenv(envLeaveDir), "posted")
	if c.Rank() == 1 {
		for end := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(posted); err == nil {
				break
			}
			if time.Now().After(end) {
				fmt.Fprintln(os.Stderr, "rank 1: rank 0 never posted")
				return 3
			}
		}
		fmt.Printf("rank 1 exits at %d\n", time.Now().UnixNano())
		os.Exit(0) // no Close
	}
	if c.Rank() != 0 {
		select {} // wait to be stopped
	}
	ops := map[string]func() (*gobtl.Request, error){
		"recv":    func() (*gobtl.Request, error) { return c.Irecv(make([]byte, 8), 1, 0) },
		"any":     func() (*gobtl.Request, error) { return c.Irecv(make([]byte, 8), gobtl.AnySource, 0) },
		"barrier": func() (*gobtl.Request, error) { return gobtl.Ibarrier(c) },
	}
	first := os.Getenv(envLeaveWait)
	r, err := ops[first]()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rank 0: post:", err)
		return 3
	}
	if err := os.WriteFile(posted, nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "rank 0:", err)
		return 3
	}
	_, err = c.Wait(r)
	fmt.Printf("rank 0 %s failed at %d: peer lost %v: %v\n", first, time.Now().UnixNano(), errors.Is(err, gobtl.ErrPeerLost), err)
	for _, name := range []string{"recv", "any", "barrier"} {
		if name == first {
			continue
		}
		r, err := ops[name]()
		if err == nil {
			_, err = c.Wait(r)
		}
		fmt.Printf("rank 0 then %s: peer lost %v: %v\n", name, errors.Is(err, gobtl.ErrPeerLost), err)
	}
	return 4 // the job failed; the launcher has stopped it by now
}

var leaveAt = regexp.MustCompile(`rank 1 exits at (\d+)`)
var failedAt = regexp.MustCompile(`rank 0 \w+ failed at (\d+)`)

// TestARankThatExitsZeroWithoutCloseFailsTheJobAndIsLostToItsPeers: over
// ib (softrc) and sm, rank 1 exits 0 without Close while rank 0 waits on
// it in a receive naming it, a receive from any source and a barrier.
// gobtl run fails the job naming rank 1 and how it ended, and rank 0's
// pending operation and the later ones fail with ErrPeerLost. Over ib
// the receives waited until --timeout before and the barrier failed
// after 21.9 s (its connection to a dead rank gave up after 21 tries);
// how long rank 0 took after rank 1's exit is logged, not judged.
func TestARankThatExitsZeroWithoutCloseFailsTheJobAndIsLostToItsPeers(t *testing.T) {
	for _, kind := range []string{"ib", "sm"} {
		for _, wait := range []string{"recv", "any", "barrier"} {
			t.Run(kind+"/"+wait, func(t *testing.T) {
				res := mptest.Job{NP: 2, Role: "leave", Stack: stackFile(t, "rdma_read", kind, nil), Command: true,
					Timeout: 20 * time.Second, Env: []string{envLeaveWait + "=" + wait, envLeaveDir + "=" + t.TempDir()}}.Run(t)
				if res.Status == 0 {
					t.Fatalf("gobtl run exited 0 after rank 1 left without Close\n%s", res)
				}
				if !regexp.MustCompile(`gobtl run: rank 1 \(pid \d+\) exited with status 0 before Close \(without finalizing\); job of 2 ranks stopped`).MatchString(res.Stderr) {
					t.Errorf("gobtl run does not name rank 1 and how it ended\n%s", res)
				}
				if n := strings.Count(res.Stdout, "peer lost true"); n != 3 {
					t.Errorf("%d of rank 0's 3 operations failed with ErrPeerLost\n%s", n, res)
				}
				left, failed := leaveAt.FindStringSubmatch(res.Stdout), failedAt.FindStringSubmatch(res.Stdout)
				if left != nil && failed != nil {
					l, _ := strconv.ParseInt(left[1], 10, 64)
					f, _ := strconv.ParseInt(failed[1], 10, 64)
					t.Logf("rank 0's %s failed %v after rank 1 exited; the job took %v", wait, time.Duration(f-l).Round(time.Microsecond), res.Took.Round(time.Millisecond))
				}
				if t.Failed() {
					t.FailNow()
				}
			})
		}
	}
}

// panicRole: rank 1 panics with its communicator closed by a deferred
// Close, as the README writes it, while rank 0 waits on it in a receive.
func panicRole() int {
	signal.Ignore(syscall.SIGTERM)
	c, err := openComm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer c.Close()
	if err := c.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 3
	}
	if c.Rank() == 1 {
		panic("rank 1 gives up")
	}
	_, err = c.Recv(make([]byte, 8), 1, 0)
	fmt.Fprintf(os.Stderr, "rank 0: receive from rank 1: peer lost %v: %v\n", errors.Is(err, gobtl.ErrPeerLost), err)
	return 4
}

// errorRole: rank 1's receive fails (rank 0 sends 16 bytes into its 8),
// and it returns the error past a deferred Close, while rank 0 waits for
// a message rank 1 will now never send. Rank 1's Close meets no one.
func errorRole() int {
	signal.Ignore(syscall.SIGTERM)
	c, err := openComm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	if c.Rank() == 0 {
		defer c.Close()
		if err := c.Send(make([]byte, 16), 1, 0); err != nil {
			fmt.Fprintln(os.Stderr, "rank 0: send:", err)
			return 3
		}
		_, err = c.Recv(make([]byte, 8), 1, 1)
		fmt.Fprintf(os.Stderr, "rank 0: receive from rank 1: peer lost %v: %v\n", errors.Is(err, gobtl.ErrPeerLost), err)
		return 4
	}
	var closeErr error
	var closed time.Duration
	err = func() error {
		defer func() {
			start := time.Now()
			closeErr = c.Close()
			closed = time.Since(start)
		}()
		if _, err := c.Recv(make([]byte, 8), 0, 0); err != nil {
			return err
		}
		return c.Send(make([]byte, 8), 0, 1)
	}()
	fmt.Fprintf(os.Stderr, "rank 1: %v\nrank 1: Close returned after %v: %v\n", err, closed.Round(time.Millisecond), closeErr)
	return 1
}

var panicLine = regexp.MustCompile(`(?m)^panic: rank 1 gives up`)
var launcherLine = regexp.MustCompile(`gobtl run: rank 1 \(pid \d+\) exited with status 2`)

// TestAPanickingRankStopsTheJobAtOnceItsPanicFirst: with `defer
// comm.Close()`, a panic of rank 1 is printed, then the launcher stops
// the job; rank 0, waiting on rank 1, sees ErrPeerLost. Before, Close's
// finalize waited 30 s for rank 0 first. How long the job took is
// logged.
func TestAPanickingRankStopsTheJobAtOnceItsPanicFirst(t *testing.T) {
	for _, kind := range []string{"ib", "sm"} {
		t.Run(kind, func(t *testing.T) {
			res := mptest.Job{NP: 2, Role: "panic", Stack: stackFile(t, "rdma_read", kind, nil), Command: true, Timeout: 20 * time.Second}.Run(t)
			p, l := panicLine.FindStringIndex(res.Stderr), launcherLine.FindStringIndex(res.Stderr)
			switch {
			case res.Status != 2:
				t.Fatalf("gobtl run's status is %d, not the panic's 2\n%s", res.Status, res)
			case p == nil || l == nil:
				t.Fatalf("no panic, or no launcher's report of it\n%s", res)
			case p[0] > l[0]:
				t.Fatalf("the panic comes after the launcher's report\n%s", res)
			case !strings.Contains(res.Stderr, "rank 0: receive from rank 1: peer lost true"):
				t.Fatalf("rank 0's receive did not fail with ErrPeerLost\n%s", res)
			}
			t.Logf("the job stopped after %v", res.Took.Round(time.Millisecond))
		})
	}
}

// TestCloseAfterAFailedOperationMeetsNoOneForLong: rank 1's receive
// failed and it returns past its deferred Close while rank 0 waits on
// it; Close gives up on the others after pml.FailedFinalize (2 s), not
// the 30 s finalize, says why, and does not finalize, so the launcher
// fails the job and tells rank 0.
func TestCloseAfterAFailedOperationMeetsNoOneForLong(t *testing.T) {
	res := mptest.Job{NP: 2, Role: "error", Stack: stackFile(t, "rdma_read", "sm", nil), Command: true, Timeout: 20 * time.Second}.Run(t)
	for _, want := range []string{
		`rank 1: .*message truncated`,
		`rank 1: Close returned after .*: pml: finalize: the other ranks did not all close within 2s of this rank's failure`,
		`gobtl run: rank 1 \(pid \d+\) exited with status 1; job of 2 ranks stopped`,
		`rank 0: receive from rank 1: peer lost true`,
	} {
		if !regexp.MustCompile(want).MatchString(res.Stderr) {
			t.Errorf("the output does not match %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("%s", res)
	}
	t.Logf("the job stopped after %v", res.Took.Round(time.Millisecond))
}

// mismatchRole: rank 1 calls three allreduces with other arguments than
// the others' (another length, another operation, another length by the
// non-blocking form); every rank prints how each ended, then they run
// one whose ranks agree.
func mismatchRole(c *gobtl.Comm) int {
	odd := c.Rank() == 1
	calls := []struct {
		name string
		call func() error
	}{
		{"lengths", func() error {
			n := 1
			if odd {
				n = 2
			}
			return gobtl.Allreduce(c, make([]int64, n), make([]int64, n), gobtl.Sum)
		}},
		{"operations", func() error {
			op := gobtl.Sum
			if odd {
				op = gobtl.Max
			}
			return gobtl.Allreduce(c, make([]int64, 4), make([]int64, 4), op)
		}},
		{"nonblocking lengths", func() error {
			n := 1
			if odd {
				n = 1 << 15
			}
			r, err := gobtl.Iallreduce(c, make([]float64, n), make([]float64, n), gobtl.Sum)
			if err == nil {
				_, err = c.Wait(r)
			}
			return err
		}},
	}
	for _, k := range calls {
		err := k.call()
		fmt.Printf("rank %d %s: mismatch %v truncated %v: %v\n", c.Rank(), k.name, errors.Is(err, gobtl.ErrMismatch), errors.Is(err, gobtl.ErrTruncated), err)
	}
	out := make([]int64, 1)
	if err := gobtl.Allreduce(c, []int64{1}, out, gobtl.Sum); err != nil || out[0] != int64(c.Size()) {
		fmt.Fprintf(os.Stderr, "rank %d: an allreduce whose ranks agree after them: %v, %d\n", c.Rank(), err, out[0])
		return 1
	}
	return 0
}

// TestACollectiveWhoseRanksDisagreeFailsAlikeBetweenProcesses: over sm
// and ib, 3 ranks (more than this host's cores, so the point-to-point
// algorithms, not the node component), each of the three disagreements
// fails with ErrMismatch on every rank and ErrTruncated on none; the job
// then goes on and ends cleanly.
func TestACollectiveWhoseRanksDisagreeFailsAlikeBetweenProcesses(t *testing.T) {
	for _, kind := range []string{"sm", "ib"} {
		t.Run(kind, func(t *testing.T) {
			res := mptest.Job{NP: 3, Role: "mismatch", Stack: stackFile(t, "rdma_read", kind, nil), Timeout: time.Minute}.Run(t)
			if res.Failed() {
				t.Fatalf("the job failed\n%s", res)
			}
			for _, name := range []string{"lengths", "operations", "nonblocking lengths"} {
				for r := range 3 {
					if want := fmt.Sprintf("rank %d %s: mismatch true truncated false", r, name); !strings.Contains(res.Stdout, want) {
						t.Errorf("no %q", want)
					}
				}
			}
			if t.Failed() {
				t.Fatalf("%s", res)
			}
		})
	}
}
