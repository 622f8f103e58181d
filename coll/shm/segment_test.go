package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// testDir is a directory of the test's own in /dev/shm (tmpfs, as the
// segments'), or the test's temporary directory where there is none.
func testDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "shmtest")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestASegmentIsTheLeadersOwnAndNeverAttachedThroughALink(t *testing.T) {
	dir := testDir(t)
	lay := newLayout(3, 256, 1024, 2)
	s, err := createSegment(dir, "gobtl-t-", lay)
	if err != nil {
		t.Fatal(err)
	}
	defer s.unmap()
	name := s.name()
	if !validName(name, "gobtl-t-") {
		t.Errorf("the segment's name %q is not one attach takes", name)
	}
	if st, err := os.Lstat(filepath.Join(dir, name)); err != nil || st.Mode() != 0o600 {
		t.Errorf("the segment file: %v, mode %v, want a plain file of mode 0600", err, st.Mode())
	}
	// A link to it under another segment name is not followed.
	link := "gobtl-t-coll-0123456789abcdef"
	if err := os.Symlink(filepath.Join(dir, name), filepath.Join(dir, link)); err != nil {
		t.Fatal(err)
	}
	if a, err := attachSegment(dir, link, "gobtl-t-", lay); err == nil {
		a.unmap()
		t.Errorf("attached through a link")
	}
	// The segment attaches, and is the same memory.
	a, err := attachSegment(dir, name, "gobtl-t-", lay)
	if err != nil {
		t.Fatal(err)
	}
	defer a.unmap()
	*s.counter(2, cTake) = 77
	if got := *a.counter(2, cTake); got != 77 {
		t.Errorf("the attached segment reads %d where the leader wrote 77", got)
	}
	if err := s.unlink(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after unlink: %v, want no file", err)
	}
}

// attach refuses what is not a segment made for it: a name that is a
// path or of another prefix, a file another mode or size, a segment
// made for another layout.
func TestAttachRefusesWhatIsNotItsSegment(t *testing.T) {
	dir := testDir(t)
	lay := newLayout(2, 256, 1024, 2)
	s, err := createSegment(dir, "gobtl-t-", lay)
	if err != nil {
		t.Fatal(err)
	}
	defer s.unmap()
	good := s.name()
	n := 0
	write := func(mode os.FileMode, size int) string {
		n++
		name := fmt.Sprintf("gobtl-t-coll-%016x", n)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, name), mode)
		return name
	}
	for _, c := range []struct {
		what, name, prefix string
		lay                layout
	}{
		{"a path", "../" + good, "gobtl-t-", lay},
		{"another prefix", good, "gobtl-u-", lay},
		{"a short name", "gobtl-t-coll-12", "gobtl-t-", lay},
		{"mode 0644", write(0o644, lay.total), "gobtl-t-", lay},
		{"another size", write(0o600, lay.total+4096), "gobtl-t-", lay},
		{"a file of zeros", write(0o600, lay.total), "gobtl-t-", lay},
		{"another layout", good, "gobtl-t-", newLayout(2, 512, 1024, 2)},
	} {
		if a, err := attachSegment(dir, c.name, c.prefix, c.lay); err == nil {
			a.unmap()
			t.Errorf("%s (%s) attached", c.what, c.name)
		}
	}
}

// A segment that does not fit in its file system is an error when it is
// made — fallocate's ENOSPC — and leaves no file behind, instead of a
// SIGBUS when a page is first touched.
func TestASegmentTooLargeForTheFileSystemFailsWhenMade(t *testing.T) {
	dir := testDir(t)
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	avail := int(fs.Bavail) * int(fs.Bsize)
	lay := newLayout(2, 256, 1<<30, (avail>>30)+2) // more than is free
	s, err := createSegment(dir, "gobtl-t-", lay)
	if err == nil {
		s.unmap()
		t.Fatalf("a segment of %d bytes on %d free was made", lay.total, avail)
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("%v, want ENOSPC", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// The tree covers every rank once, each subtree is a contiguous range
// that starts at its root, children come in increasing order, and no
// rank has more than radix of them.
func TestTheTreeIsMadeOfContiguousRanges(t *testing.T) {
	for n := 1; n <= 70; n++ {
		for _, radix := range []int{1, 2, 4, 7} {
			tr := newTree(n, radix)
			var size func(v int) int
			size = func(v int) int {
				s := 1
				next := v + 1
				for _, k := range tr.kids[v] {
					if k != next || tr.parent[k] != v {
						t.Fatalf("n %d radix %d: child %d of %d is not the start of the next range (%d)", n, radix, k, v, next)
					}
					sk := size(k)
					next += sk
					s += sk
				}
				return s
			}
			if got := size(0); got != n {
				t.Fatalf("n %d radix %d: the tree covers %d ranks", n, radix, got)
			}
			for v := range n {
				if len(tr.kids[v]) > radix {
					t.Fatalf("n %d radix %d: rank %d has %d children", n, radix, v, len(tr.kids[v]))
				}
			}
		}
	}
}

// The shares of a chunk cover it once, in order, each a whole number of
// cache lines and of elements but for the last.
func TestTheSharesOfAChunkCoverItInWholeLines(t *testing.T) {
	for _, z := range []int{1, 4, 8, 12, 16, 24, 100} {
		for _, n := range []int{1, 2, 3, 7, 16} {
			for _, e := range []int{0, 1, 5, 64, 1000} {
				at := 0
				for r := range n {
					lo, hi := share(r, n, e, z)
					if lo != at || hi < lo {
						t.Fatalf("z %d n %d e %d: share %d is [%d,%d) after %d", z, n, e, r, lo, hi, at)
					}
					if hi != e*z && (hi%line != 0 || hi%z != 0) {
						t.Fatalf("z %d n %d e %d: share %d ends at %d", z, n, e, r, hi)
					}
					at = hi
				}
				if at != e*z {
					t.Fatal(fmt.Sprintf("z %d n %d e %d: the shares end at %d, want %d", z, n, e, at, e*z))
				}
			}
		}
	}
}
