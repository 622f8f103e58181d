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
	tmp, shm := t.TempDir(), t.TempDir()
	dead, live := deadOwner(t), owner.Self()
	if dead.Alive() || !live.Alive() {
		t.Fatalf("dead owner alive %v, this process alive %v", dead.Alive(), live.Alive())
	}
	// A live process whose pid a dead owner's name carries, with another
	// start time, is not that owner.
	if (owner.Owner{Pid: live.Pid, Start: live.Start + 1}).Alive() {
		t.Fatal("a reused pid counts as the owner")
	}
	deadJob, liveJob := NewJobID(), NewJobID()
	old := time.Now().Add(-time.Hour)
	mkdir := func(dir, name string) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "boot.sock"), nil, 0o600)
		return p
	}
	file := func(name string) string {
		p := filepath.Join(shm, name)
		if err := os.WriteFile(p, []byte("segment"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old, old)
		return p
	}
	bootDir := func(o owner.Owner, job string) string {
		p := mkdir(tmp, BootDirPrefix(o)+"0123456789abcdef")
		os.WriteFile(filepath.Join(p, jobFile), []byte(job), 0o600)
		return p
	}
	// A launcher from before the boot directory hid the job id.
	olderJob := NewJobID()
	gone := []string{
		bootDir(dead, deadJob),
		mkdir(tmp, "gobtl-"+olderJob+"-"+dead.String()),
		mkdir(tmp, owner.PluginDirPrefix(dead)+"123"),
		file(boot.ShmPrefix(deadJob) + "sm-0-0123456789abcdef"),
		file(boot.ShmPrefix(deadJob) + "extoll-net-1-0123456789abcdef.mbox"),
		file(boot.ShmPrefix(olderJob) + "sm-0"),
	}
	kept := []string{
		bootDir(live, liveJob),
		mkdir(tmp, owner.PluginDirPrefix(live)+"456"),
		mkdir(tmp, "gobtl-test-bin-789"),       // no owner in the name
		file(boot.ShmPrefix(liveJob) + "sm-0"), // a live launcher's job: never looked at
		file("gobtl-softrc-link.rail0"),        // shared by jobs
		file("unrelated"),
	}
	// A launcher from before owners were named: its socket tells.
	oldDead := socketDir(t, mkdir(tmp, "gobtl-0123456789ab-42"), "boot.sock", false)
	oldLive := socketDir(t, mkdir(tmp, "gobtl-ba9876543210-43"), "boot.sock", true)
	kept = append(kept, oldLive)
	// A plugin's socket directory from before owners were named, its
	// plugin gone.
	oldPlugin := socketDir(t, mkdir(tmp, "gobtl-plugin-77"), "plugin123", false)
	orphan := file("gobtl-slurm.pmix.7.0-sm.local-0") // another engine's job, held by nobody
	held := file("gobtl-slurm.pmix.8.0-sm.local-0")   // held open by this process
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	young := filepath.Join(shm, "gobtl-slurm.pmix.9.0-sm.local-0") // just created
	os.WriteFile(young, nil, 0o600)
	kept = append(kept, held, young)

	removed, err := SweepStale(tmp, shm)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(gone)
	if !slices.Equal(removed, gone) {
		t.Fatalf("the sweep at start removed\n%q\nwant\n%q", removed, gone)
	}
	removed, err = Clean(CleanOptions{TempDir: tmp, ShmDir: shm, Orphans: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{oldDead, oldPlugin, orphan}; !slices.Equal(removed, want) {
		t.Fatalf("clean removed %q, want %q", removed, want)
	}
	for _, p := range append(gone, oldDead, oldPlugin, orphan) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
