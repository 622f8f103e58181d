package launch

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/internal/owner"
)

// deadOwner is a process that has ended: a child that ran and was reaped.
func deadOwner(t *testing.T) owner.Owner {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := owner.Of(cmd.Process.Pid)
	cmd.Wait()
	return o
}

// socketDir puts a unix socket named sock in dir, in place of the
// boot.sock mkdir left there: one that is listened on until the test ends
// (listening), or one nobody listens on any more. It returns dir.
func socketDir(t *testing.T, dir, sock string, listening bool) string {
	t.Helper()
	os.Remove(filepath.Join(dir, "boot.sock"))
	ln, err := net.Listen("unix", filepath.Join(dir, sock))
	if err != nil {
		t.Fatal(err)
	}
	if listening {
		t.Cleanup(func() { ln.Close() })
		return dir
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	return dir
}

func TestCleanRemovesWhatDeadOwnersLeftAndNothingElse(t *testing.T) {
	dead, live := deadOwner(t), owner.Self()
	if dead.Alive() || !live.Alive() {
		t.Fatalf("dead owner alive %v, this process alive %v", dead.Alive(), live.Alive())
	}
	// A live process whose pid a dead owner's name carries, with another
	// start time, is not that owner.
	if (owner.Owner{Pid: live.Pid, Start: live.Start + 1}).Alive() {
		t.Fatal("a reused pid counts as the owner")
	}
	l := plantLeftovers(t, dead, live)

	removed, err := SweepStale(l.tmp, l.shm)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(l.gone)
	if !slices.Equal(removed, l.gone) {
		t.Fatalf("the sweep at start removed\n%q\nwant\n%q", removed, l.gone)
	}
	removed, err = Clean(CleanOptions{TempDir: l.tmp, ShmDir: l.shm, Orphans: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, l.orphans) {
		t.Fatalf("clean removed %q, want %q", removed, l.orphans)
	}
	for _, p := range append(l.gone, l.orphans...) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", p, err)
		}
	}
	for _, p := range l.kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// leftovers are a temporary and a shared-memory directory with what jobs
// and plugins left in them: gone is what the sweep at a launcher's start
// must remove, orphans what only clean --orphans removes (in the order it
// reports them), kept what neither may touch.
type leftovers struct {
	t                   *testing.T
	tmp, shm            string
	old                 time.Time
	gone, orphans, kept []string
}

// plantLeftovers fills two fresh directories with the files and
// directories of dead's jobs and live's, of launchers from before owners
// were named, and of other engines' jobs.
func plantLeftovers(t *testing.T, dead, live owner.Owner) *leftovers {
	l := &leftovers{t: t, tmp: t.TempDir(), shm: t.TempDir(), old: time.Now().Add(-time.Hour)}
	deadJob, liveJob := NewJobID(), NewJobID()
	// A launcher from before the boot directory hid the job id.
	olderJob := NewJobID()
	l.gone = []string{
		l.bootDir(dead, deadJob),
		l.mkdir("gobtl-" + olderJob + "-" + dead.String()),
		l.mkdir(owner.PluginDirPrefix(dead) + "123"),
		l.file(boot.ShmPrefix(deadJob) + "sm-0-0123456789abcdef"),
		l.file(boot.ShmPrefix(deadJob) + "extoll-net-1-0123456789abcdef.mbox"),
		l.file(boot.ShmPrefix(olderJob) + "sm-0"),
	}
	l.kept = []string{
		l.bootDir(live, liveJob),
		l.mkdir(owner.PluginDirPrefix(live) + "456"),
		l.mkdir("gobtl-test-bin-789"),            // no owner in the name
		l.file(boot.ShmPrefix(liveJob) + "sm-0"), // a live launcher's job: never looked at
		l.file("gobtl-softrc-link.rail0"),        // shared by jobs
		l.file("unrelated"),
	}
	// A launcher from before owners were named: its socket tells.
	oldDead := socketDir(t, l.mkdir("gobtl-0123456789ab-42"), "boot.sock", false)
	oldLive := socketDir(t, l.mkdir("gobtl-ba9876543210-43"), "boot.sock", true)
	// A plugin's socket directory from before owners were named, its
	// plugin gone.
	oldPlugin := socketDir(t, l.mkdir("gobtl-plugin-77"), "plugin123", false)
	orphan := l.file("gobtl-slurm.pmix.7.0-sm.local-0") // another engine's job, held by nobody
	held := l.file("gobtl-slurm.pmix.8.0-sm.local-0")   // held open by this process
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	young := filepath.Join(l.shm, "gobtl-slurm.pmix.9.0-sm.local-0") // just created
	os.WriteFile(young, nil, 0o600)
	l.orphans = []string{oldDead, oldPlugin, orphan}
	l.kept = append(l.kept, oldLive, held, young)
	return l
}

// mkdir makes a directory in the temporary directory, with a boot socket
// file in it.
func (l *leftovers) mkdir(name string) string {
	p := filepath.Join(l.tmp, name)
	if err := os.Mkdir(p, 0o700); err != nil {
		l.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p, "boot.sock"), nil, 0o600)
	return p
}

// file makes a segment in the shared-memory directory, an hour old.
func (l *leftovers) file(name string) string {
	p := filepath.Join(l.shm, name)
	if err := os.WriteFile(p, []byte("segment"), 0o600); err != nil {
		l.t.Fatal(err)
	}
	os.Chtimes(p, l.old, l.old)
	return p
}

// bootDir makes o's boot directory of job.
func (l *leftovers) bootDir(o owner.Owner, job string) string {
	p := l.mkdir(BootDirPrefix(o) + "0123456789abcdef")
	os.WriteFile(filepath.Join(p, jobFile), []byte(job), 0o600)
	return p
}
