package plugins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A plugin runs from the file that was checked, not from its path. The
// executable is opened once; its sha256 pin is checked on that open
// file; and the process is started from it, by exec of
// /proc/self/fd/N — the Linux form of fexecve, which opens the inode
// the descriptor holds, whatever the path names by then. A file renamed
// over the plugin between the check and the start (another user's, in a
// directory they can write) is never run: the old way, hashing by path
// and executing by path, ran it in 4 of 40 `config check`s with a swap
// every 2 ms. go-plugin's own SecureConfig is not used: it hashes the
// command's path again, a third look at a name that may have changed.
//
// A file written in place (by someone who may write the file itself)
// shows in its modification time, which only its owner can set back:
// start compares it, and the size, before the check and after the
// plugin started, and refuses a plugin whose file changed between.

// openFile is a plugin's executable, open.
type openFile struct {
	f *os.File
	// script says the file starts with #!: the kernel hands its
	// interpreter the path it was executed by, which the interpreter
	// opens, so the descriptor must stay open in the plugin.
	script bool
	mtime  syscall.Timespec
	size   int64
}

// openExecutable opens the regular, executable file at path for start.
func openExecutable(path string) (*openFile, error) {
	f, err := os.Open(path) // close-on-exec
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	case st.Mode&0o111 == 0:
		f.Close()
		return nil, fmt.Errorf("%s is not executable (chmod +x it)", path)
	}
	x := &openFile{f: f, mtime: st.Mtim, size: st.Size}
	var magic [2]byte
	n, _ := f.ReadAt(magic[:], 0)
	x.script = n == 2 && bytes.Equal(magic[:], []byte("#!"))
	return x, nil
}

// sha256 hashes the open file.
func (x *openFile) sha256() ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(x.f, 0, 1<<62)); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// checkPin checks the open file against pin, a policy block's sha256
// (hex, "sha256:" allowed before it; empty: not pinned).
func (x *openFile) checkPin(path, pin string) error {
	if pin == "" {
		return nil
	}
	want, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(pin), "sha256:"))
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("sha256 %q is not 64 hex digits", pin)
	}
	got, err := x.sha256()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s has sha256 %x, the stack file pins %x", path, got, want)
	}
	return nil
}

// unchanged says whether the file is as it was when it was opened.
func (x *openFile) unchanged() bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(x.f.Fd()), &st); err != nil {
		return false
	}
	return st.Mtim == x.mtime && st.Size == x.size
}

func (x *openFile) close() { x.f.Close() }

// command returns a command that executes the open file with argv0 as
// its name and extra as its descriptors 3, 4, ...; release closes what it
// opened for the start, once the command has started (or failed to).
//
// An executable binary's descriptor stays close-on-exec: the kernel opens
// /proc/self/fd/N before it closes such descriptors, and the plugin gets
// none of it. N must survive os/exec's start, which moves descriptors
// onto 0..len(files)-1 and, for those it must move out of the way, onto
// numbers above the highest it passes: so N is at least len(files), and
// extra is passed from duplicates above N. A script's interpreter opens
// the path itself, after exec: its descriptor is passed, as the last.
func (x *openFile) command(argv0 string, extra []*os.File) (cmd *exec.Cmd, release func(), err error) {
	if len(extra) == 0 {
		return nil, nil, fmt.Errorf("plugins: command needs a descriptor to pass") // start always passes the host pipe
	}
	nfiles := 3 + len(extra)
	if x.script {
		cmd = exec.Command("/proc/self/fd/" + strconv.Itoa(nfiles))
		cmd.Args[0] = argv0
		cmd.ExtraFiles = append(extra[:len(extra):len(extra)], x.f)
		return cmd, func() {}, nil
	}
	fd, err := unix.FcntlInt(x.f.Fd(), unix.F_DUPFD_CLOEXEC, nfiles)
	if err != nil {
		return nil, nil, fmt.Errorf("plugins: duplicate the executable's descriptor: %w", err)
	}
	files := make([]*os.File, 0, len(extra))
	release = func() {
		unix.Close(fd)
		for _, f := range files {
			f.Close()
		}
	}
	for _, e := range extra {
		d, err := unix.FcntlInt(e.Fd(), unix.F_DUPFD_CLOEXEC, fd+1)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("plugins: duplicate a descriptor for the plugin: %w", err)
		}
		files = append(files, os.NewFile(uintptr(d), e.Name()))
	}
	cmd = exec.Command("/proc/self/fd/" + strconv.Itoa(fd))
	cmd.Args[0] = argv0
	cmd.ExtraFiles = files
	return cmd, release, nil
}

// testHookBeforeExec, when set, runs once the executable is open and
// checked and before it runs, with its path: tests swap the file there.
var testHookBeforeExec func(path string)
