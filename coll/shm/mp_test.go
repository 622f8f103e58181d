package shm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/layers"
	"github.com/gobtl/gobtl/internal/mptest"
)

// The test binary doubles as the rank program of the tests whose ranks
// are processes (internal/mptest).
func TestMain(m *testing.M) {
	mptest.Main(m, map[string]func() int{
		"collectives": rank(collectives),
		"killed":      rank(killed),
		"auto":        rank(auto),
	}, nil)
}

// rank is a role: a rank that opens its communicator as every gobtl
// program does, from the stack the test wrote, and says which job it is.
func rank(role func(c *gobtl.Comm) error) func() int {
	return func() int {
		c, err := gobtl.Init(context.Background(), gobtl.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			return 2
		}
		defer c.Close()
		fmt.Fprintf(os.Stderr, "job %s rank %d pid %d\n", os.Getenv(boot.EnvJobID), c.Rank(), os.Getpid())
		if err := role(c); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", c.Rank(), err)
			return 1
		}
		return 0
	}
}

// shmStack is a stack over btl/sm that forces every collective the
// component serves to it, its liveness checks every 20 ms.
func shmStack(t *testing.T) string {
	t.Helper()
	stack := `btl "sm" "sm" {
  liveness_interval = "20ms"
}
coll {
  barrier   = "shm"
  bcast     = "shm"
  reduce    = "shm"
  allreduce = "shm"
  allgather = "shm"
}
`
	path := filepath.Join(t.TempDir(), "stack.hcl")
	if err := os.WriteFile(path, []byte(stack), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// collectives runs the table test's calls (the component's default
// slots and chunks: 4 KiB and 64 KiB) through the segment.
func collectives(c *gobtl.Comm) error {
	cc := layers.Coll(c)
	for _, kind := range []string{"barrier", "bcast", "reduce", "allreduce", "allgather"} {
		for _, s := range shapes(kind, cc.Size()) {
			s.count *= 100 // up to 20,000 elements: 160 KiB of sums, 320 of maps
			if err := check(cc, s); err != nil {
				return err
			}
		}
		if calls(cc, kind, "shm") == 0 {
			return fmt.Errorf("no %s went through the component", kind)
		}
	}
	return nil
}

// Ranks that are processes on one node get the collectives' results
// through the segment, and leave nothing in /dev/shm.
func TestProcessesOfOneNodeMatchTheSerialReference(t *testing.T) {
	res := mptest.Job{NP: 3, Role: "collectives", Stack: shmStack(t)}.Run(t)
	if res.Failed() {
		t.Fatalf("the job failed:\n%s", res)
	}
	if left := jobLeft(res.Stderr); len(left) > 0 {
		t.Errorf("left in /dev/shm: %v", left)
	}
}

// killed: a loop of collectives through the segment that rank 1 leaves
// by SIGKILL in the middle; the others report how their collective
// ended, outliving the launcher's SIGTERM long enough to see it.
func killed(c *gobtl.Comm) error {
	signal.Ignore(syscall.SIGTERM)
	cc := layers.Coll(c)
	buf := make([]byte, 256<<10)
	ops := []func() error{
		func() error { return cc.Barrier(bg) },
		func() error { return cc.Allreduce(bg, buf[:8], buf[:8], sumInt64) },
		func() error { return cc.Allreduce(bg, buf, buf, sumInt64) },
		func() error { return cc.Bcast(bg, buf, 0) },
		func() error { return cc.Allgather(bg, buf[:len(buf)/c.Size()/8*8], buf) },
	}
	for i := 0; ; i++ {
		if c.Rank() == 1 && i == 300 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		start := time.Now()
		if err := ops[i%len(ops)](); err != nil {
			fmt.Printf("rank %d: collective %d ended after %v: peer lost %v: %v\n",
				c.Rank(), i, time.Since(start).Round(time.Millisecond), errors.Is(err, core.ErrPeerLost), err)
			return nil
		}
	}
}

// A rank killed in the middle of collectives through the segment fails
// every other rank's collective with ErrPeerLost (btl/sm sees its pidfd
// close) instead of leaving them waiting on its flags, and the killed
// job leaves nothing in /dev/shm: its segments were unlinked as soon as
// every rank had mapped them.
func TestARankKilledFailsTheOthersCollectives(t *testing.T) {
	const np = 4
	res := mptest.Job{NP: np, Role: "killed", Stack: shmStack(t), Timeout: time.Minute}.Run(t)
	if !res.Failed() {
		t.Fatalf("the job succeeded although rank 1 died\n%s", res)
	}
	for r := range np {
		if r == 1 {
			continue
		}
		if !regexp.MustCompile(fmt.Sprintf(`rank %d: collective \d+ ended after .*: peer lost true`, r)).MatchString(res.Stdout) {
			t.Errorf("rank %d did not see rank 1 lost:\nstdout:\n%s\nstderr:\n%s", r, res.Stdout, res.Stderr)
		}
	}
	if left := jobLeft(res.Stderr); len(left) > 0 {
		t.Errorf("left in /dev/shm: %v", left)
	}
	t.Log(strings.TrimSpace(res.Stdout))
}

// auto: the default stack's collectives, which go through the segment
// exactly when the job agreed that its ranks own their cores.
func auto(c *gobtl.Comm) error {
	cc := layers.Coll(c)
	for _, kind := range []string{"barrier", "allreduce", "bcast"} {
		for _, s := range shapes(kind, cc.Size())[:3] {
			if err := check(cc, s); err != nil {
				return err
			}
		}
	}
	own := cc.Tuning().Machine.OwnCore
	shm := calls(cc, "allreduce", "shm") > 0
	fmt.Printf("rank %d: own core %v, through the segment %v\n", c.Rank(), own, shm)
	if shm != own {
		return fmt.Errorf("own core %v but through the segment %v", own, shm)
	}
	return nil
}

// With the default stack, ranks that own their cores — two ranks bound to
// two CPUs by the launcher — take the component by the decision's own
// choice, and ranks that share them (one more rank than CPUs) do not.
func TestTheDefaultStackTakesTheComponentWhereRanksOwnTheirCores(t *testing.T) {
	for _, np := range []int{2, runtime.NumCPU() + 1} {
		t.Run(fmt.Sprint(np, " ranks"), func(t *testing.T) {
			res := mptest.Job{NP: np, Role: "auto"}.Run(t)
			if res.Failed() {
				t.Fatalf("the job failed:\n%s", res)
			}
			want := np <= runtime.NumCPU()
			if !strings.Contains(res.Stdout, fmt.Sprintf("own core %v, through the segment %v", want, want)) {
				t.Errorf("%d ranks on %d CPUs:\n%s", np, runtime.NumCPU(), res.Stdout)
			}
		})
	}
}

var jobLine = regexp.MustCompile(`job (\S+) rank`)

// jobLeft lists the component's segments of the job the ranks named in
// stderr that are still in /dev/shm.
func jobLeft(stderr string) []string {
	m := jobLine.FindStringSubmatch(stderr)
	if m == nil {
		return []string{"(no job named)"}
	}
	left, _ := filepath.Glob(filepath.Join("/dev/shm", core.ShmPrefix(m[1])+"coll-*"))
	return left
}
