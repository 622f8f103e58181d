// Package attack runs the attacks of issue 30 items 1, 2 and 4 as another
// user of the node would: a second user (made with useradd, driven with
// runuser) watches for the job's id, makes the names of the job's files
// before its ranks do — 0666 files it keeps open, links to root's 0600
// files — shifts the addresses of any translation table it got hold of,
// and opens thousands of connections to a rank's EXTOLL listener. The
// job runs as root and exchanges messages whose every byte is checked.
//
// The job's temp directory and shared-memory directory are private
// copies of /tmp and /dev/shm (mode 1777, as those are), so that the
// attacker watches this test's jobs and no others of the host. The tests
// need root (useradd, runuser, the job's files as root's) and skip
// without it. With GOBTL_ATTACK_REPORT=1 they report what happened
// instead of failing, to run the same attacks against an older gobtl:
//
//	git archive <old> | tar -x -C /tmp/old && cp -r test/attack /tmp/old/test/
//	(cd /tmp/old && go test -c -o /tmp/old.test ./test/attack)
//	GOBTL_ATTACK_REPORT=1 /tmp/old.test -test.v
package attack

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/internal/mptest"
)

func TestMain(m *testing.M) {
	mptest.Main(m, map[string]func() int{
		"exchange": exchange,
		"plant":    plant,
		"flood":    flood,
	}, nil)
}

// attackUser is the second user of the node.
const attackUser = "gobtl-attacker"

// maxPending is core.MaxPending (spelled out: the test also builds
// against a gobtl from before it).
const maxPending = 1024

// setup makes the attacker's user if it is not there and a directory
// both users reach, with a copy of this test binary the attacker runs and
// the job's temp directory (TMPDIR while the test runs) and shared-memory
// directory, both 1777.
func setup(t *testing.T) (dir, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attacks need root: a second user (useradd, runuser) and a job running as root")
	}
	for _, tool := range []string{"useradd", "runuser"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	if exec.Command("id", "-u", attackUser).Run() != nil {
		out, err := exec.Command("useradd", "-M", "-r", "-s", "/bin/sh", attackUser).CombinedOutput()
		if err != nil && exec.Command("id", "-u", attackUser).Run() != nil {
			t.Fatalf("useradd %s: %v\n%s", attackUser, err, out)
		}
	}
	dir, err := os.MkdirTemp("", "gobtl-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, sub := range []string{"tmp", "shm"} {
		os.Mkdir(filepath.Join(dir, sub), 0o755)
		os.Chmod(filepath.Join(dir, sub), 0o1777)
	}
	t.Setenv("TMPDIR", filepath.Join(dir, "tmp"))
	self, _ := os.Executable()
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "attack.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// attacker runs role as the attacker's user; its output comes line by
// line on the channel, which closes when it ends.
func attacker(t *testing.T, bin, role string, env ...string) <-chan string {
	t.Helper()
	args := append([]string{"-u", attackUser, "--", "env", mptest.EnvRole + "=" + role}, env...)
	cmd := exec.Command("runuser", append(args, bin)...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(lines)
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return lines
}

// await returns the first line that starts with prefix, or "" after d.
func await(lines <-chan string, prefix string, d time.Duration) string {
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return ""
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			return ""
		}
	}
}

// stack is the example stack file name with its shared-memory directory
// set to dir/shm, written into dir.
func stack(t *testing.T, dir, name string) string {
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../conf/examples", name))
	if err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join(dir, "shm")
	s := strings.Replace(string(b), `btl "extoll" "extoll0" {`, `btl "extoll" "extoll0" {`+"\n  shm_dir = \""+shm+"\"", 1)
	s = regexp.MustCompile(`(?m)^(\s*)dir\s*=.*$`).ReplaceAllString(s, `${1}dir = "`+shm+`"`)
	if !strings.Contains(s, shm) {
		s = strings.Replace(s, `btl "sm" "sm" {`, `btl "sm" "sm" {`+"\n  dir = \""+shm+"\"", 1)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// check fails t with what went wrong, or with GOBTL_ATTACK_REPORT set
// only logs it.
func check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	switch {
	case ok:
		t.Logf("ok: "+format, args...)
	case os.Getenv("GOBTL_ATTACK_REPORT") != "":
		t.Logf("ATTACK SUCCEEDED: "+format, args...)
	default:
		t.Errorf(format, args...)
	}
}

// victims makes root's 0600 files for the planted links to point at.
func victims(t *testing.T) []string {
	dir := t.TempDir()
	var paths []string
	for r := range 2 {
		p := filepath.Join(dir, fmt.Sprintf("root-only-%d", r))
		os.WriteFile(p, []byte("root's secret"), 0o600)
		paths = append(paths, p)
	}
	return paths
}

func intact(paths []string) int {
	n := 0
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && string(b) == "root's secret" {
			n++
		}
	}
	return n
}

// plantedJob runs a job of two ranks on stackFile while the attacker
// plants kind's names, and returns how the job ended, the attacker's
// report and root's files the planted links pointed at.
func plantedJob(t *testing.T, kind, stackName string) (mptest.Result, string, []string) {
	dir, bin := setup(t)
	stackFile := stack(t, dir, stackName)
	vict := victims(t)
	goFile, done := filepath.Join(dir, "go"), filepath.Join(dir, "done")
	lines := attacker(t, bin, "plant", envTmp+"="+os.TempDir(), envShm+"="+filepath.Join(dir, "shm"), envKind+"="+kind,
		envVictims+"="+strings.Join(vict, ","), envDone+"="+done)
	if await(lines, "watching", time.Minute) == "" {
		t.Fatal("the attacker did not start")
	}
	// The ranks exchange once the attacker has planted (or has had ten
	// seconds to).
	go func() {
		await(lines, "planted", 10*time.Second)
		os.WriteFile(goFile, nil, 0o644)
	}()
	res := mptest.Job{NP: 2, Role: "exchange", Stack: stackFile, Env: []string{envGo + "=" + goFile}, Timeout: 3 * time.Minute}.Run(t)
	os.WriteFile(done, nil, 0o644)
	report := await(lines, "report", time.Minute)
	t.Logf("job: status %d\n%s%s", res.Status, res.Stdout, res.Stderr)
	t.Logf("attacker: %s", report)
	return res, report, vict
}

// verified says whether both ranks checked every message and found
// none corrupt.
func verified(res mptest.Result) bool {
	return res.Status == 0 && strings.Count(res.Stdout, ": 210 messages, 0 corrupt") == 2
}

// Issue 30 item 1: the attacker learned the job id from the boot
// directory's name, made the card's mailbox and translation files 0666
// and kept them open, and linked others to root's 0600 files: it read
// the job's packets, corrupted 1,216 messages through shifted addresses,
// and overwrote root's files. Now nothing it made is used or touched.
func TestAnotherUserCannotPlantTheCardsFiles(t *testing.T) {
	res, report, vict := plantedJob(t, "extoll", "extoll-static.hcl")
	var seen, used, planted, shifted int
	fmt.Sscanf(report, "report: %d jobs seen, %d of %d planted mailboxes used by the job, %d translation entries shifted", &seen, &used, &planted, &shifted)
	check(t, verified(res), "the job ran with every message verified (status %d: %s)", res.Status, strings.TrimSpace(res.Stdout+res.Stderr))
	check(t, used == 0, "the job used %d of the %d mailboxes the attacker planted", used, planted)
	check(t, shifted == 0, "the attacker shifted %d translation entries the job used", shifted)
	check(t, intact(vict) == 2, "%d of 2 root-only files intact behind the planted links", intact(vict))
}

// Issue 30 item 2: the planted name of an sm segment stopped the job
// ("file exists"). Now the segment takes another name.
func TestAnotherUserCannotStopSmFromStarting(t *testing.T) {
	res, report, _ := plantedJob(t, "sm", "sm.hcl")
	var seen, used, planted, shifted int
	fmt.Sscanf(report, "report: %d jobs seen, %d of %d planted mailboxes used by the job, %d translation entries shifted", &seen, &used, &planted, &shifted)
	check(t, verified(res), "the job ran with every message verified (status %d: %s)", res.Status, strings.TrimSpace(res.Stdout+res.Stderr))
	t.Logf("the attacker saw %d jobs and planted %d names", seen, planted)
}
