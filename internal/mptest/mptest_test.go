package mptest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
)

func TestMain(m *testing.M) {
	Main(m, map[string]func() int{
		"hello": func() int {
			fmt.Printf("rank %s of %s in job %s\n", os.Getenv(boot.EnvRank), os.Getenv(boot.EnvSize), os.Getenv(boot.EnvJobID))
			return 0
		},
		"fail": func() int { return 3 },
		"hang": func() int { time.Sleep(time.Minute); return 0 },
	}, nil)
}

func TestAJobRunsItsRanksInTheirRoleWithAFreshJobID(t *testing.T) {
	var jobs []string
	for range 2 {
		r := Job{NP: 3, Role: "hello"}.Run(t)
		if r.Failed() || strings.Count(r.Stdout, "rank ") != 3 || !strings.Contains(r.Stdout, "rank 2 of 3") {
			t.Fatalf("ranks did not all say hello:\n%s", r)
		}
		_, job, _ := strings.Cut(r.Stdout, "in job ")
		jobs = append(jobs, strings.Fields(job)[0])
	}
	if jobs[0] == jobs[1] {
		t.Fatalf("two jobs share the id %s", jobs[0])
	}
}

func TestAFailedRankFailsTheJob(t *testing.T) {
	r := Job{NP: 2, Role: "fail"}.Run(t)
	if !r.Failed() || !strings.Contains(r.Stderr, "exited with status 3") {
		t.Fatalf("a rank that exits 3:\n%s", r)
	}
}

// A job that runs into its timeout fails its test instead of hanging it.
func TestAJobThatHangsFailsAtItsTimeout(t *testing.T) {
	var ft fatalT
	func() {
		defer func() { recover() }()
		Job{NP: 2, Role: "hang", Timeout: 300 * time.Millisecond}.Run(&ft)
	}()
	if !strings.Contains(ft.msg, "ran into its 300ms timeout") {
		t.Fatalf("a hung job: %q", ft.msg)
	}
}

// fatalT records what a harness function fails a test with.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

func TestCheckNamesTheFirstWrongByte(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 4096 + 3} {
		b := Fill(make([]byte, n), 42)
		if err := Check(b, 42); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if n == 0 {
			continue
		}
		if err := Check(b, 43); err == nil {
			t.Errorf("%d bytes pass as another seed's payload", n)
		}
		b[n-1] ^= 1
		if err := Check(b, 42); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("byte %d of %d", n-1, n)) {
			t.Errorf("%d bytes, last flipped: %v", n, err)
		}
	}
}

func TestPollGivesUpAtItsDeadline(t *testing.T) {
	calls := 0
	err := Poll("never", 20*time.Millisecond, func() bool { return false }, func() int { calls++; return 0 })
	if err == nil || !strings.Contains(err.Error(), "waiting for never") || calls == 0 {
		t.Fatalf("err %v after %d progress calls", err, calls)
	}
	n := 0
	if err := Poll("three looks", time.Second, func() bool { n++; return n == 3 }); err != nil {
		t.Fatal(err)
	}
}
