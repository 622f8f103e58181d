package launch

import (
	"bytes"
	"context"
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

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

// The test binary doubles as the rank program: with envRole set, TestMain
// runs the named role instead of the tests.
const envRole = "GOBTL_LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(rankMain(role))
	}
	os.Exit(m.Run())
}

func rankMain(role string) int {
	if f, ok := gobtlRoles[role]; ok {
		return f()
	}
	if role == "bootdir" {
		// Before hello, while the directory is there.
		if err := checkBootDir(); err != nil {
			fmt.Fprintln(os.Stderr, "boot directory:", err)
			return 1
		}
	}
	switch role {
	case "plain":
		return 0 // a program that never joins the job
	case "leave-early":
		signal.Ignore(syscall.SIGTERM) // rank 0 outlives the stop to report
	}
	ctx := context.Background()
	b, ok, err := boot.FromEnv(ctx)
	if !ok || err != nil {
		fmt.Fprintln(os.Stderr, "no bootstrap:", ok, err)
		return 2
	}
	r := b.Rank()
	switch role {
	case "exchange":
		return exchangeRole(ctx, b)
	case "fail-in-fence":
		// Rank 1 exits 3 while the others wait in a fence that can never
		// complete; the launcher must fail that fence and stop them.
		if r == 1 {
			return 3
		}
		b.Fence(ctx) // fails when the launcher gives up (see package boot's tests)
		select {}    // wait to be stopped
	case "sigkill":
		f, err := os.Create(filepath.Join(os.Getenv("TEST_SHM"), boot.ShmPrefix(b.JobID())+fmt.Sprintf("seg-%d", r)))
		if err != nil {
			return 1
		}
		f.Close()
		b.Fence(ctx) // every segment exists before anyone dies
		if r == 1 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		select {}
	case "ignore-term":
		// A rank that ignores SIGTERM still goes, by SIGKILL.
		signal.Ignore(syscall.SIGTERM)
		b.Fence(ctx)
		if r == 0 {
			return 5
		}
		select {}
	case "abort":
		if r == 2 {
			b.Abort(1, "bad frame from rank 0")
		}
		select {}
	case "abort-exit":
		b.Abort(1, fmt.Sprintf("rank %d gives up", r))
		return 1
	case "sleep":
		select {}
	case "bootdir":
		return finalize(b)
	case "leave-early":
		return leaveEarly(ctx, b)
	}
	return 99
}

// exchangeRole fences twice and prints what every rank put.
func exchangeRole(ctx context.Context, b *boot.Client) int {
	r := b.Rank()
	// Two rounds, so that the second fence carries only new puts.
	for round := range 2 {
		b.Put(fmt.Sprintf("k%d", round), []byte(fmt.Sprintf("r%d-%d", r, round)))
		if err := b.Fence(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "fence:", err)
			return 1
		}
	}
	var got []string
	for p := range b.Size() {
		for round := range 2 {
			v, err := b.Get(ctx, p, fmt.Sprintf("k%d", round))
			if err != nil {
				fmt.Fprintln(os.Stderr, "get:", err)
				return 1
			}
			got = append(got, string(v))
		}
	}
	fmt.Printf("rank %d sees %s\n", r, strings.Join(got, ","))
	return finalize(b)
}

// leaveEarly: rank 1 exits without finalizing (status TEST_LEAVE_STATUS)
// while rank 0 waits in a second fence; rank 0 says how the launcher's
// notice reached it.
func leaveEarly(ctx context.Context, b *boot.Client) int {
	// Both ranks are up, rank 0 ignoring SIGTERM, before rank 1 leaves.
	if err := b.Fence(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fence:", err)
		return 1
	}
	if b.Rank() == 1 {
		code, _ := strconv.Atoi(os.Getenv("TEST_LEAVE_STATUS"))
		return code
	}
	lost := make(chan error, 1)
	b.OnPeerLost(func(rank int, err error) {
		lost <- fmt.Errorf("rank %d: %w", rank, err)
	})
	ferr := b.Fence(ctx)
	err := <-lost
	fmt.Printf("fence: %v\nnotice: %v\npeer lost %v\n", ferr, err, errors.Is(err, core.ErrPeerLost))
	select {} // wait to be stopped
}

// finalize ends a rank that succeeded: a rank that joined the job and
// exits without finalizing fails it.
func finalize(b *boot.Client) int {
	if err := b.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "finalize:", err)
		return 1
	}
	return 0
}

// checkBootDir checks, in a rank, the boot directory the launcher made:
// a name that does not give the job id away, mode 0700, and the job id
// in a 0600 file inside.
func checkBootDir() error {
	dir, job := filepath.Dir(os.Getenv(boot.EnvBoot)), os.Getenv(boot.EnvJobID)
	name := filepath.Base(dir)
	if strings.Contains(name, job) || !regexp.MustCompile(`^gobtl-boot-[0-9]+-[0-9]+-[0-9a-f]{16}$`).MatchString(name) {
		return fmt.Errorf("name %s (job %s)", name, job)
	}
	for path, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, filepath.Join(dir, jobFile): 0o600} {
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if st.Mode() != want {
			return fmt.Errorf("%s: mode %v, want %v", path, st.Mode(), want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, jobFile)); err != nil || string(b) != job {
		return fmt.Errorf("job file holds %q (%v), want %q", b, err, job)
	}
	fmt.Println("boot directory ok:", name)
	return nil
}

// The boot directory's name says nothing of the job (issue 30 item 1:
// another user read the job id from gobtl-<job>-<pid>-<start> and
// created the job's files before its ranks did).
func TestTheBootDirectoryHidesTheJobID(t *testing.T) {
	res, out, _ := runRole(t, "bootdir", 2, nil)
	if res.Status != 0 || strings.Count(out, "boot directory ok") != 2 {
		t.Fatalf("status %d:\n%s", res.Status, out)
	}
}

func runRole(t *testing.T, role string, np int, mod func(*Config)) (Result, string, time.Duration) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg := Config{
		NP: np, Prog: exe, Args: []string{"-test.run=^$"},
		Env:    []string{envRole + "=" + role},
		Stdout: &out, Stderr: &out,
		ShmDir: t.TempDir(),
	}
	if mod != nil {
		mod(&cfg)
	}
	cfg.Env = append(cfg.Env, "TEST_SHM="+cfg.ShmDir)
	start := time.Now()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res, out.String(), time.Since(start)
}

func TestEveryRankSeesEveryPutAfterTheFence(t *testing.T) {
	res, out, _ := runRole(t, "exchange", 4, func(c *Config) { c.TagOutput = true })
	if res.Status != 0 {
		t.Fatalf("status %d, output:\n%s", res.Status, out)
	}
	want := "r0-0,r0-1,r1-0,r1-1,r2-0,r2-1,r3-0,r3-1"
	for r := range 4 {
		line := fmt.Sprintf("[%d] rank %d sees %s\n", r, r, want)
		if !strings.Contains(out, line) {
			t.Errorf("missing %q in output:\n%s", line, out)
		}
	}
}

func TestAFailingRankStopsTheJobAndGivesItsStatus(t *testing.T) {
	res, out, took := runRole(t, "fail-in-fence", 3, nil)
	if res.Status != 3 || res.First == nil || res.First.Rank != 1 {
		t.Fatalf("status %d first %+v, output:\n%s", res.Status, res.First, out)
	}
	if !strings.Contains(out, "rank 1 (pid") || !strings.Contains(out, "exited with status 3") {
		t.Errorf("report does not name rank 1 and its status:\n%s", out)
	}
	t.Logf("job stopped %v after start", took)
}

func TestAKilledRankIsNamedAndItsSegmentsRemoved(t *testing.T) {
	shm := t.TempDir()
	res, out, took := runRole(t, "sigkill", 2, func(c *Config) { c.ShmDir = shm })
	if res.Status != 128+9 || res.First == nil || res.First.Rank != 1 || res.First.Signal != syscall.SIGKILL {
		t.Fatalf("status %d first %+v, output:\n%s", res.Status, res.First, out)
	}
	if !strings.Contains(out, "rank 1") || !strings.Contains(out, "signal 9") {
		t.Errorf("report does not name rank 1 and signal 9:\n%s", out)
	}
	left, _ := filepath.Glob(filepath.Join(shm, "*"))
	if len(left) != 0 {
		t.Errorf("files left in the shm dir: %v", left)
	}
	t.Logf("job stopped %v after start", took)
}

func TestARankThatIgnoresSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	res, out, _ := runRole(t, "ignore-term", 2, func(c *Config) { c.Grace = 50 * time.Millisecond })
	if res.Status != 5 || res.Exits[1].Signal != syscall.SIGKILL {
		t.Fatalf("status %d exits %+v, output:\n%s", res.Status, res.Exits, out)
	}
}

func TestAnAbortThroughTheBootstrapStopsTheJob(t *testing.T) {
	res, out, _ := runRole(t, "abort", 3, nil)
	if res.Status == 0 || res.First == nil || res.First.Rank != 2 || res.First.Abort == "" {
		t.Fatalf("status %d first %+v, output:\n%s", res.Status, res.First, out)
	}
	if !strings.Contains(out, "rank 2") || !strings.Contains(out, "aborted: bad frame from rank 0") {
		t.Errorf("report does not carry the abort:\n%s", out)
	}
}

// A rank that reports an abort and exits at once may be reaped before
// the launcher has read its report: the job's report still carries it,
// even when that rank was the last one alive.
func TestAnAbortIsReportedWhenItsRankExitsRightAfterIt(t *testing.T) {
	for i := range 20 {
		res, out, _ := runRole(t, "abort-exit", 1, nil)
		if res.First == nil || res.First.Abort != "rank 0 gives up" || !strings.Contains(out, "aborted: rank 0 gives up") {
			t.Fatalf("run %d: status %d first %+v, output:\n%s", i, res.Status, res.First, out)
		}
	}
}

func TestTheTimeoutStopsAJobThatHangs(t *testing.T) {
	res, out, _ := runRole(t, "sleep", 2, func(c *Config) { c.Timeout = 100 * time.Millisecond })
	if res.Status != StatusTimeout || !strings.Contains(out, "timed out after 100ms") {
		t.Fatalf("status %d, output:\n%s", res.Status, out)
	}
}

func TestCancelingTheContextStopsTheJob(t *testing.T) {
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan Result)
	go func() {
		res, err := Run(ctx, Config{NP: 2, Prog: exe, Args: []string{"-test.run=^$"},
			Env: []string{envRole + "=sleep"}, Stdout: &out, Stderr: &out, ShmDir: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	cancel()
	res := <-done
	if res.Status != StatusInterrupted {
		t.Fatalf("status %d, output:\n%s", res.Status, out.String())
	}
}

func TestBadConfigurationsAreErrors(t *testing.T) {
	for _, c := range []Config{
		{NP: 0, Prog: "true"},
		{NP: 1},
		{NP: 1, Prog: "no-such-program-gobtl"},
		{NP: 1, Prog: "true", StackFile: "/no/such/stack.hcl"},
	} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("Run(%+v) succeeded", c)
		}
	}
}

func TestTaggedOutputPrefixesEveryLine(t *testing.T) {
	var buf bytes.Buffer
	w := &lockedWriter{w: &buf}
	forward(strings.NewReader("one\ntwo\nthree-no-newline"), w, 7, true)
	want := "[7] one\n[7] two\n[7] three-no-newline\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

// A rank that joined the job and exits without finalizing fails it, also
// with status 0 (a return before Close: gobtl run said 0 before, issue 30
// item 5); the launcher names it and how it ended, and tells the other
// ranks at once, whose bootstraps report the rank lost (core.PeerWatcher).
// A program that never joins the job may exit 0.
func TestARankThatEndsWithoutFinalizingFailsTheJobAndTheOthersAreTold(t *testing.T) {
	for _, tc := range []struct {
		status int
		how    string
	}{
		{0, "exited with status 0 before Close (without finalizing)"},
		{3, "exited with status 3"},
	} {
		t.Run(fmt.Sprint("status", tc.status), func(t *testing.T) {
			res, out, took := runRole(t, "leave-early", 2, func(c *Config) {
				c.Env = append(c.Env, fmt.Sprintf("TEST_LEAVE_STATUS=%d", tc.status))
			})
			if res.Status == 0 || res.First == nil || res.First.Rank != 1 || res.First.Unfinalized != (tc.status == 0) {
				t.Fatalf("status %d, first failure %v:\n%s", res.Status, res.First, out)
			}
			for _, want := range []string{
				`gobtl run: rank 1 \(pid \d+\) ` + regexp.QuoteMeta(tc.how) + `; job of 2 ranks stopped`,
				`notice: rank 1: boot: the launcher reports rank 1 \(pid \d+\) ` + regexp.QuoteMeta(tc.how) + `: peer lost`,
				`peer lost true`,
			} {
				if !regexp.MustCompile(want).MatchString(out) {
					t.Errorf("the output does not match %q", want)
				}
			}
			if t.Failed() {
				t.Fatalf("output:\n%s", out)
			}
			t.Logf("stopped after %v:\n%s", took, out)
		})
	}
	res, out, _ := runRole(t, "plain", 2, nil)
	if res.Status != 0 {
		t.Fatalf("a program that never joined the job exited 0, and the job's status is %d:\n%s", res.Status, out)
	}
}
