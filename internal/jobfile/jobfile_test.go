package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// names makes random return each of seq in turn, then fresh ones.
func names(t *testing.T, seq ...string) {
	t.Helper()
	old := random
	t.Cleanup(func() { random = old })
	random = func() string {
		if len(seq) == 0 {
			return old()
		}
		s := seq[0]
		seq = seq[1:]
		return s
	}
}

func mode(t *testing.T, path string) (os.FileMode, uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return os.FileMode(st.Mode & 0o7777), st.Uid
}

// A name another user planted (mode 0666, kept open to read what the job
// writes) is passed over, and the planted file is left as it was.
func TestCreatePassesOverAPlantedName(t *testing.T) {
	dir := t.TempDir()
	planted := filepath.Join(dir, "gobtl-j-sm-0-aaaa")
	if err := os.WriteFile(planted, []byte("planted"), 0o666); err != nil {
		t.Fatal(err)
	}
	names(t, "aaaa", "bbbb")
	f, err := Create(dir, "gobtl-j-sm-0-", "", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Name() != filepath.Join(dir, "gobtl-j-sm-0-bbbb") {
		t.Fatalf("created %s, want the second name", f.Name())
	}
	if b, _ := os.ReadFile(planted); string(b) != "planted" {
		t.Fatalf("the planted file now holds %q", b)
	}
	if m, uid := mode(t, f.Name()); m != 0o600 || uid != uint32(os.Geteuid()) {
		t.Fatalf("mode %#o uid %d, want 0600 of %d", m, uid, os.Geteuid())
	}
	if st, _ := f.Stat(); st.Size() != 8192 {
		t.Fatalf("size %d, want 8192", st.Size())
	}
}

// A symbolic link at the name is never followed: the file it points to
// (root's 0600 file in the issue) keeps its bytes.
func TestCreateNeverFollowsALink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(victim, filepath.Join(dir, "x-aaaa.mbox"))
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "x-bbbb.mbox"))
	names(t, "aaaa", "bbbb", "cccc")
	f, err := Create(dir, "x-", ".mbox", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(victim); string(b) != "secret" {
		t.Fatalf("the link's target now holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dangling link's target was created (%v)", err)
	}
	if filepath.Base(f.Name()) != "x-cccc.mbox" {
		t.Fatalf("created %s", f.Name())
	}
}

func TestCreateGivesUpWhenEveryNameIsTaken(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p-same"), nil, 0o600)
	names(t, strings.Split(strings.Repeat("same ", attempts), " ")[:attempts]...)
	if _, err := Create(dir, "p-", "", 0); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("err = %v, want EEXIST", err)
	}
}

// Under a umask that takes the owner's bits, the file is still 0600.
func TestCreateMakesAn0600FileUnderAnyUmask(t *testing.T) {
	old := unix.Umask(0o277)
	defer unix.Umask(old)
	f, err := Create(t.TempDir(), "u-", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, _ := mode(t, f.Name()); m != 0o600 {
		t.Fatalf("mode %#o", m)
	}
}

// Open takes the job's own file and refuses a link, a file open to
// others, a file with a second name and a directory.
func TestOpenRefusesWhatIsNotOurs(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(dir, "seg-", "", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	good := f.Name()
	if g, err := Open(good); err != nil {
		t.Fatalf("our own file: %v", err)
	} else {
		g.Close()
	}
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, nil, 0o600)
	os.Chmod(open, 0o666)
	hard := filepath.Join(dir, "hard")
	os.WriteFile(hard, nil, 0o600)
	os.Link(hard, hard+"2")
	for _, path := range []string{link, open, hard, t.TempDir()} {
		if g, err := Open(path); err == nil {
			g.Close()
			t.Errorf("%s opened", path)
		} else if !errors.Is(err, ErrNotOurs) && !errors.Is(err, syscall.EISDIR) {
			t.Errorf("%s: %v, want ErrNotOurs", path, err)
		}
	}
}

// A file of another user is not ours, whatever its mode (root only:
// it takes a chown).
func TestOpenRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file of another user needs root")
	}
	path := filepath.Join(t.TempDir(), "theirs")
	os.WriteFile(path, nil, 0o600)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if g, err := Open(path); !errors.Is(err, ErrNotOurs) {
		if g != nil {
			g.Close()
		}
		t.Fatalf("err = %v, want ErrNotOurs", err)
	}
}

func TestMkdirPassesOverAPlantedNameAndIsPrivate(t *testing.T) {
	parent := t.TempDir()
	os.Mkdir(filepath.Join(parent, "gobtl-boot-aaaa"), 0o777)
	os.Symlink(parent, filepath.Join(parent, "gobtl-boot-bbbb"))
	names(t, "aaaa", "bbbb", "cccc")
	dir, err := Mkdir(parent, "gobtl-boot-")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "gobtl-boot-cccc" {
		t.Fatalf("made %s", dir)
	}
	if m, _ := mode(t, dir); m != 0o700 {
		t.Fatalf("mode %#o", m)
	}
}

func TestRandomNamesDiffer(t *testing.T) {
	a, b := Random(), Random()
	if len(a) != 16 || a == b {
		t.Fatalf("%q %q", a, b)
	}
}
