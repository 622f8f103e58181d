// Package startcheck tests that what `gobtl config check` accepts
// starts, and that what it refuses fails a job's start the same way: a
// configuration error at the block's file:line:col, from every rank's
// Init, never a lost peer at the first message. The stacks are issue
// 30's: weights for the wrong number of rails, a flow-control plugin
// whose setup EXTOLL refuses, an if_include that names no interface, a
// shared-memory directory that does not exist.
package startcheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/mptest"
)

var testpolicyBin string

func TestMain(m *testing.M) {
	mptest.Main(m, map[string]func() int{"rank": rankMain}, func() (func(), error) {
		dir, cleanup, err := mptest.BuildTemp("", "../../plugins/internal/testplugins/testpolicy")
		testpolicyBin = filepath.Join(dir, "testpolicy")
		return cleanup, err
	})
}

// rankMain starts, then sends to and receives from every other rank, so
// that a channel lost at its first message shows.
func rankMain() int {
	c, err := gobtl.Init(context.Background(), gobtl.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv("GOBTL_RANK"), err)
		return 1
	}
	defer c.Close()
	buf := make([]byte, 8)
	for p := range c.Size() {
		if p == c.Rank() {
			continue
		}
		r, err := c.Irecv(buf, p, 1)
		if err == nil {
			err = c.Send(buf, p, 1)
		}
		if err == nil {
			_, err = c.Wait(r)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: to and from rank %d: %v\n", c.Rank(), p, err)
			return 1
		}
	}
	return 0
}

// stacks are the four, each with the diagnostic (after the file
// name) that config check and every rank's start give.
func stacks() map[string]struct{ src, want string } {
	return map[string]struct{ src, want string }{
		"weights for three rails on two": {`btl "ib" "x4" {
  device = "hca0"
  port   = 1
}
btl "ib" "x1" {
  device = "hca1"
  port   = 1
}
policy "sched" {
  builtin = "weighted_striping"
  weights = [4, 1, 7]
}
`, `:9:1: The scheduling policy "weighted_striping" refused the job's rails; sched: 3 weights for the 2 subchannels`},
		"no credit slots from a plugin": {fmt.Sprintf(`btl "extoll" "e0" {}
policy "flow_control" {
  plugin       = "testpolicy"
  path         = %q
  credit_slots = 0
}
`, testpolicyBin), `:1:1: Cannot open btl "extoll" "e0"; extoll: velo: the policy gave 0 credit slots per peer`},
		"an if_include that names no interface": {`btl "ib" "i0" {
  if_include = "nosuch0"
}
`, `:1:1: Cannot open btl "ib" "i0"; ib: softrc port address: netif: no interface that is up matches if_include "nosuch0"`},
		"a shared-memory directory that does not exist": {`btl "sm" "local" {
  dir = "/nonexistent/gobtl-shm"
}
`, `:1:1: Cannot open btl "sm" "local"; sm: segment directory: no such file or directory`},
	}
}

func TestWhatConfigCheckRefusesFailsEveryRanksStartTheSameWay(t *testing.T) {
	gobtlBin := mptest.Gobtl(t)
	for name, s := range stacks() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stack.hcl")
			if err := os.WriteFile(path, []byte(s.src), 0o644); err != nil {
				t.Fatal(err)
			}
			want := path + s.want
			out, err := exec.Command(gobtlBin, "config", "check", path).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) {
				t.Fatalf("config check: %v, want exit 1 and %q:\n%s", err, want, out)
			}
			// A job of processes started without config check's checks
			// (as mpirun or srun start one): every rank's Init fails with
			// the same diagnostic — those the launcher did not stop first,
			// once one had failed — and no rank, nor its log, speaks of a
			// lost peer.
			res := mptest.Job{NP: 2, Role: "rank", Stack: path}.Run(t)
			if !res.Failed() || strings.Contains(res.Stderr, "peer lost") {
				t.Fatalf("the job, want a configuration error and no lost peer:\n%s", res)
			}
			said := 0
			for _, l := range strings.Split(res.Stderr, "\n") {
				if !strings.HasPrefix(l, "rank ") {
					continue
				}
				if _, diag, _ := strings.Cut(l, ": gobtl: "); !strings.HasPrefix(diag, want) {
					t.Errorf("a rank said %q, want %q", l, want)
				}
				said++
			}
			if said == 0 {
				t.Errorf("no rank said why it failed:\n%s", res)
			}
			// gobtl run checks the stack first, as config check does: it
			// says so once and starts no rank.
			res = mptest.Job{NP: 2, Role: "rank", Stack: path, Command: true}.Run(t)
			if !res.Failed() || strings.Count(res.Stderr, want) != 1 || !strings.Contains(res.Stderr, "no rank was started") {
				t.Errorf("gobtl run: want the diagnostic once and no rank started:\n%s", res)
			}
		})
	}
}

// What config check accepts starts: the same stacks, corrected, run a
// job whose ranks all reach each other.
func TestWhatConfigCheckAcceptsStarts(t *testing.T) {
	gobtlBin := mptest.Gobtl(t)
	fixed := map[string][2]string{
		"weights for two rails":       {"weights = [4, 1, 7]", "weights = [4, 1]"},
		"a credit slot from a plugin": {"credit_slots = 0", "credit_slots = 1"},
		"the loopback interface":      {`if_include = "nosuch0"`, `if_include = "lo"`},
		"a shared-memory directory":   {`dir = "/nonexistent/gobtl-shm"`, `dir = "/dev/shm"`},
	}
	all := stacks()
	for name, fix := range fixed {
		t.Run(name, func(t *testing.T) {
			var src string
			for _, s := range all {
				if strings.Contains(s.src, fix[0]) {
					src = strings.Replace(s.src, fix[0], fix[1], 1)
				}
			}
			path := filepath.Join(t.TempDir(), "stack.hcl")
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(gobtlBin, "config", "check", path).CombinedOutput(); err != nil {
				t.Fatalf("config check: %v\n%s", err, out)
			}
			if res := (mptest.Job{NP: 2, Role: "rank", Stack: path}).Run(t); res.Failed() {
				t.Fatalf("the job:\n%s", res)
			}
		})
	}
}
