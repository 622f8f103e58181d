package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
)

// initComm opens the communicator of a rank, or says why it cannot.
func initComm() *gobtl.Comm {
	c, err := gobtl.Init(context.Background(), gobtl.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return nil
	}
	return c
}

// gobtlRoles are ranks that open a communicator as every gobtl program
// does (the default stack: self and shared memory).
var gobtlRoles = map[string]func() int{
	// stuck: rank 1 waits for a message nobody sends (tag 7); rank 0
	// starts a rendezvous send nobody receives (tag 9), then waits in a
	// barrier rank 1 never reaches.
	"stuck": func() int {
		c := initComm()
		if c == nil {
			return 2
		}
		if c.Rank() == 0 {
			if _, err := c.Isend(make([]byte, 1<<20), 1, 9); err != nil {
				return 1
			}
			fmt.Println("rank 0 waits")
			c.Barrier()
			return 1
		}
		fmt.Println("rank 1 waits")
		c.Recv(make([]byte, 64), 0, 7)
		return 1
	},
	// ring: every rank sends 64 KiB (a rendezvous on sm) to the next
	// and checks what the previous sent.
	"ring": func() int {
		c := initComm()
		if c == nil {
			return 2
		}
		defer c.Close()
		n, r := c.Size(), c.Rank()
		out, in := make([]byte, 64<<10), make([]byte, 64<<10)
		for i := range out {
			out[i] = byte(r*7 + i)
		}
		req, err := c.Isend(out, (r+1)%n, 3)
		if err != nil {
			fmt.Fprintln(os.Stderr, "isend:", err)
			return 1
		}
		from := (r + n - 1) % n
		if _, err := c.Recv(in, from, 3); err != nil {
			fmt.Fprintln(os.Stderr, "recv:", err)
			return 1
		}
		if _, err := c.Wait(req); err != nil {
			fmt.Fprintln(os.Stderr, "send:", err)
			return 1
		}
		for i := range in {
			if in[i] != byte(from*7+i) {
				fmt.Fprintf(os.Stderr, "byte %d from rank %d is %d\n", i, from, in[i])
				return 1
			}
		}
		return 0
	},
	"hello": func() int {
		c := initComm()
		if c == nil {
			return 2
		}
		defer c.Close()
		return 0
	},
}

// On a timeout, every rank says where it is blocked and what it has
// pending before the launcher stops the job, as mpirun's
// --report-state-on-timeout --get-stack-traces.
func TestATimedOutJobReportsWhereEveryRankIs(t *testing.T) {
	res, out, took := runRole(t, "stuck", 2, func(c *Config) { c.Timeout = 3 * time.Second; c.TagOutput = true })
	if res.Status != StatusTimeout {
		t.Fatalf("status %d, output:\n%s", res.Status, out)
	}
	for _, want := range []string{
		"gobtl run: timed out after 3s; asking the ranks where they are",
		"[1] gobtl: rank 1 (pid ",
		"[1]     recv from 0 tag 7, 64 bytes (0 done): posted, no matching message yet",
		"[0]     operation: ",
		"[0]   main goroutine [",
		"gobtl run: timed out after 3s; stopping the job",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// The outermost API call is named, with the innermost gobtl call
	// when they differ, and the caller in the program.
	for _, want := range []string{
		`\[1\]   blocked in gobtl\.\(\*Comm\)\.Recv( \(inside .*\))?, called from github\.com/gobtl/gobtl/launch\.init\.func`,
		`\[0\]   blocked in gobtl\.\(\*Comm\)\.Barrier( \(inside .*\))?, called from github\.com/gobtl/gobtl/launch\.init\.func`,
		// sm's default mechanism table reads a message alone of 1 MiB by
		// CMA, and pipelines it where CMA is not allowed
		// (btl/sm/mechanism.go); the report names the protocol either way.
		`\[0\]     send to 1 tag 9, 1048576 bytes \(0 done\): (rdma_read, waiting for the receiver's FIN|pipeline, START sent, waiting for the receiver's REPLY)`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the output does not match %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}
	t.Logf("stopped after %v:\n%s", took, out)
}

// An interrupt (Ctrl-C, SIGTERM to gobtl run) asks for the reports too.
func TestAnInterruptedJobReportsWhereEveryRankIs(t *testing.T) {
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedWriter{w: &bytes.Buffer{}}
	done := make(chan Result)
	go func() {
		res, err := Run(ctx, Config{NP: 2, Prog: exe, Args: []string{"-test.run=^$"}, Timeout: time.Minute,
			Env: []string{envRole + "=stuck"}, Stdout: out, Stderr: out, ShmDir: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// Once both ranks wait, interrupt.
	for end := time.Now().Add(time.Minute); !strings.Contains(read(out), "rank 0 waits") || !strings.Contains(read(out), "rank 1 waits"); {
		if time.Now().After(end) {
			cancel()
			t.Fatalf("the ranks did not start within a minute:\n%s", read(out))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	res := <-done
	if res.Status != StatusInterrupted || !strings.Contains(read(out), "gobtl run: interrupted; asking the ranks where they are") ||
		strings.Count(read(out), "blocked in") != 2 {
		t.Fatalf("status %d, output:\n%s", res.Status, read(out))
	}
}

// read is what the launcher wrote to out so far, read under its lock.
func read(out *lockedWriter) string {
	out.mu.Lock()
	defer out.mu.Unlock()
	return out.w.(*bytes.Buffer).String()
}

// A program that is not a gobtl program is never sent the report signal,
// whose default action would kill it: it is stopped as before.
func TestAProgramThatCannotReportIsStoppedAtOnce(t *testing.T) {
	res, out, _ := runRole(t, "sleep", 2, func(c *Config) { c.Timeout = 200 * time.Millisecond })
	if res.Status != StatusTimeout || strings.Contains(out, "asking the ranks") {
		t.Fatalf("status %d, output:\n%s", res.Status, out)
	}
	for _, e := range res.Exits {
		if e.Signal != 15 {
			t.Errorf("rank %d ended by %v, want SIGTERM; output:\n%s", e.Rank, e, out)
		}
	}
}

// At info, each rank says once where it runs, which transport reaches
// which peers and which policies are in force, on a line that names the
// job and the rank.
func TestEveryRankSaysWhichTransportReachesWhichPeers(t *testing.T) {
	res, out, _ := runRole(t, "hello", 4, func(c *Config) { c.Env = append(c.Env, "GOBTL_LOG=info") })
	if res.Status != 0 {
		t.Fatalf("status %d, output:\n%s", res.Status, out)
	}
	re := regexp.MustCompile(`(?m)^\{.*"message":"rank (\d) of 4, (not )?bound [^:]*: .*$`)
	lines := re.FindAllString(out, -1)
	if len(lines) != 4 {
		t.Fatalf("%d start lines, want one per rank:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var rec struct {
			Job     string            `json:"job"`
			Rank    int               `json:"rank"`
			Reach   map[string]string `json:"reach"`
			Binding string            `json:"binding"`
			Message string            `json:"message"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		others := map[int]string{0: "1-3", 1: "0,2-3", 2: "0-1,3", 3: "0-2"}[rec.Rank]
		if rec.Job == "" || rec.Binding == "" || !strings.Contains(rec.Message, rec.Binding) || rec.Reach["self"] != fmt.Sprint(rec.Rank) || rec.Reach["sm:local"] != others ||
			!strings.Contains(rec.Message, fmt.Sprintf("self reaches %d, sm:local reaches %s", rec.Rank, others)) {
			t.Errorf("start line of rank %d: %s", rec.Rank, l)
		}
		if strings.Count(l, `"component"`) != 1 || strings.Count(l, `"rank"`) != 1 {
			t.Errorf("a field twice: %s", l)
		}
	}
}

// A stack file that names no transport — empty, or only a job block —
// keeps the default stack's (as an MCA parameter changes only what it
// names): a job of processes started with it reaches every peer.
func TestAStackWithoutTransportsReachesEveryPeer(t *testing.T) {
	for name, text := range map[string]string{
		"empty":    "",
		"job-only": "job {\n  protocol = \"rdma_write\"\n}\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "stack.hcl")
			if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			res, out, _ := runRole(t, "ring", 3, func(c *Config) { c.StackFile = f; c.Timeout = time.Minute })
			if res.Status != 0 {
				t.Fatalf("status %d, output:\n%s", res.Status, out)
			}
		})
	}
}
