package mp

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/internal/mptest"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// hold: a rank that starts, meets the others, says so, and waits to be
// killed.
func hold(c *gobtl.Comm) int {
	if err := c.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		return 3
	}
	fmt.Fprintf(os.Stderr, "ready rank %d\n", c.Rank())
	for {
		time.Sleep(time.Hour)
	}
}

// TestAJobKilledOutrightLeavesNothing kills a running job the way no
// clean-up code sees — the launcher with SIGKILL (its ranks die with it),
// or one rank with SIGKILL — and looks for anything of that job left in
// /dev/shm (sm's segments, EXTOLL's mailboxes and tables) or the temp
// directory (the boot directory and its socket). It looks only for this
// job's names, so that other jobs on the host do not matter.
func TestAJobKilledOutrightLeavesNothing(t *testing.T) {
	gobtlBin := mptest.Gobtl(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stack := filepath.Join(t.TempDir(), "stack.hcl")
	os.WriteFile(stack, []byte("btl \"self\" \"self\" {}\nbtl \"sm\" \"local\" {}\nbtl \"extoll\" \"nic0\" {}\n"), 0o644)
	const np = 3
	for _, victim := range []string{"launcher", "rank 1"} {
		t.Run(strings.ReplaceAll(victim, " ", ""), func(t *testing.T) {
			j := startHeldJob(t, np, gobtlBin, "run", "-np", strconv.Itoa(np), "-c", stack, "--timeout", "2m", "--", self)
			if victim == "launcher" {
				j.cmd.Process.Signal(syscall.SIGKILL)
			} else {
				syscall.Kill(j.pids[1], syscall.SIGKILL)
			}
			j.cmd.Wait()
			msgtest.Until(t, "every rank to end", time.Minute, func() bool {
				for _, pid := range j.pids {
					if running(pid) {
						return false
					}
				}
				return true
			})
			shm, _ := filepath.Glob(filepath.Join("/dev/shm", boot.ShmPrefix(j.id)+"*"))
			tmp, _ := filepath.Glob(filepath.Join(os.TempDir(), "gobtl-"+j.id+"-*"))
			if left := append(shm, tmp...); len(left) > 0 {
				t.Fatalf("job %s, killed by SIGKILL of the %s, left %q", j.id, victim, left)
			}
		})
	}
}

// heldJob is a running job whose ranks hold still: its launcher, its id
// and its ranks' pids.
type heldJob struct {
	cmd  *exec.Cmd
	id   string
	pids map[int]int
}

// startHeldJob runs the command line (a launcher of np ranks of this test
// in the role "hold") and waits, 90 s at most, until every rank has
// announced its job and pid and said it is ready. The launcher is killed
// when the test ends.
func startHeldJob(t *testing.T, np int, args ...string) *heldJob {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), mptest.EnvRole+"=hold")
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(errOut); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	j := &heldJob{cmd: cmd, pids: map[int]int{}}
	ready := 0
	var said []string
	deadline := time.After(90 * time.Second)
	for ready < np {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the job ended before every rank was ready:\n%s", strings.Join(said, "\n"))
			}
			said = append(said, l)
			var r, pid int
			var id string
			if n, _ := fmt.Sscanf(l, "job %s rank %d pid %d", &id, &r, &pid); n == 3 {
				j.id, j.pids[r] = id, pid
			}
			if strings.HasPrefix(l, "ready rank") {
				ready++
			}
		case <-deadline:
			t.Fatalf("the ranks were not ready within 90s:\n%s", strings.Join(said, "\n"))
		}
	}
	if j.id == "" || len(j.pids) != np {
		t.Fatalf("the ranks did not announce their job and pids:\n%s", strings.Join(said, "\n"))
	}
	go func() {
		for range lines {
		}
	}()
	return j
}

// running tells whether pid is a process that has not ended (a zombie
// whose parent died has ended: it holds no files and no mappings).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
