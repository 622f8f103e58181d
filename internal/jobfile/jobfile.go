// Package jobfile makes the files and directories a job keeps in places
// every user of the host can write — /dev/shm, $TMPDIR — so that they are
// the job's own and nobody else's (issue 30: another user pre-created a
// job's mailbox files, read and rewrote them, and through a symlink
// overwrote root's files).
//
// A file is created exclusively (O_EXCL: never one that exists, planted or
// left over) without following a link (O_NOFOLLOW), mode 0600, and checked
// after opening by fstat: a regular file of this user with one link and
// no access for group or others. Its name ends in a random part, so that
// nobody can create it first, and a name that exists all the same is
// passed over for another instead of failing: a planted name stops
// nothing. Peers learn the name through the job's bootstrap exchange,
// never by deriving it, and open it with the same checks (Open). A file
// for shared memory reserves its pages when it is made (fallocate), so
// that a full tmpfs is an error at start that says how much was needed
// and how much is free — not a SIGBUS at the first write to a page the
// filesystem could not supply.
//
// Directories (Mkdir) are made the same way: a random name, mode 0700,
// checked after making.
package jobfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotOurs is the error of a file or directory that is not this
// process's to trust: another user's, a link, something other than a
// regular file, or open to group or others.
var ErrNotOurs = errors.New("not this user's own file")

// attempts bounds the names Create and Mkdir try: a 64-bit random part
// collides by chance never; only names someone planted collide, and a
// planter cannot guess the next one either.
const attempts = 16

// random is the random part of a name (a variable so that the tests can
// make it collide).
var random = func() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Random is a fresh random name part: 16 hex digits.
func Random() string { return random() }

// Create makes a new file dir/prefix<random>suffix, opened for reading
// and writing, and reserves size bytes in it (fallocate; size 0 reserves
// nothing). A name that exists is passed over for another. The caller
// closes the file; on error nothing is left behind.
func Create(dir, prefix, suffix string, size int64) (*os.File, error) {
	for range attempts {
		path := filepath.Join(dir, prefix+random()+suffix)
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue // planted, or left over: another name
		}
		if err != nil {
			return nil, &os.PathError{Op: "create", Path: path, Err: err}
		}
		f := os.NewFile(uintptr(fd), path)
		// The umask may have taken bits away: the mode is exactly 0600.
		err = f.Chmod(0o600)
		if err == nil {
			err = Check(f)
		}
		if err == nil && size > 0 {
			err = Reserve(f, size)
		}
		if err != nil {
			f.Close()
			os.Remove(path)
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("jobfile: %d names under %s taken: %w", attempts, filepath.Join(dir, prefix+"*"+suffix), unix.EEXIST)
}

// Open opens the existing file at path for reading and writing, without
// following a link, and checks that it is this user's own (Check).
func Open(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("a symbolic link: %w", ErrNotOurs)}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if err := Check(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Check tells whether the open file f is this process's to trust: a
// regular file of the effective user, with one link, that neither group
// nor others may access. Its error wraps ErrNotOurs.
func Check(f *os.File) error { return CheckFD(int(f.Fd()), f.Name()) }

// CheckFD is Check on the descriptor fd of the file at path.
func CheckFD(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return checkStat(path, &st, unix.S_IFREG, 1)
}

func checkStat(path string, st *unix.Stat_t, kind uint32, links uint64) error {
	var why string
	switch euid := uint32(os.Geteuid()); {
	case st.Mode&unix.S_IFMT != kind:
		why = fmt.Sprintf("file type %#o, want %#o", st.Mode&unix.S_IFMT, kind)
	case st.Uid != euid:
		why = fmt.Sprintf("owned by uid %d, not %d", st.Uid, euid)
	case st.Mode&0o077 != 0:
		why = fmt.Sprintf("mode %#o lets group or others in", st.Mode&0o777)
	case links > 0 && uint64(st.Nlink) != links:
		why = fmt.Sprintf("%d links, want %d", st.Nlink, links)
	default:
		return nil
	}
	return fmt.Errorf("jobfile: %s: %s: %w", path, why, ErrNotOurs)
}

// Mkdir makes a new directory parent/prefix<random>, mode 0700, and
// returns its path. A name that exists is passed over for another.
func Mkdir(parent, prefix string) (string, error) {
	for range attempts {
		path := filepath.Join(parent, prefix+random())
		err := unix.Mkdir(path, 0o700)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", &os.PathError{Op: "mkdir", Path: path, Err: err}
		}
		if err := checkDir(path); err != nil {
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
	return "", fmt.Errorf("jobfile: %d names under %s taken: %w", attempts, filepath.Join(parent, prefix+"*"), unix.EEXIST)
}

// checkDir checks the directory Mkdir made through a descriptor opened
// without following a link.
func checkDir(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return checkStat(path, &st, unix.S_IFDIR, 0)
}
