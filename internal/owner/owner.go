// Package owner names the process that owns a file so that a later
// process can tell whether it is still alive: gobtl puts the owner in the
// names of what a job keeps in the temp directory (the launcher's boot
// directory, a plugin's socket directory), and `gobtl run` and `gobtl
// clean` remove what dead owners left (package launch).
package owner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Owner names a process so that a later process can tell whether it is
// still alive: its pid and its start time in clock ticks after boot
// (/proc/<pid>/stat, field 22), which differs for a process that reuses
// the pid.
type Owner struct {
	Pid   int
	Start uint64
}

// Self is the calling process as an Owner.
func Self() Owner { return Of(os.Getpid()) }

// Of is the running process pid as an Owner.
func Of(pid int) Owner {
	o := Owner{Pid: pid}
	o.Start, _ = startTime(pid)
	return o
}

// String is the owner as file names carry it: <pid>-<start>.
func (o Owner) String() string { return strconv.Itoa(o.Pid) + "-" + strconv.FormatUint(o.Start, 10) }

// Alive reports whether the owner still runs. A process that cannot be
// looked at (another user's, /proc hidden) counts as alive: files are
// removed only for owners known to be gone.
func (o Owner) Alive() bool {
	start, err := startTime(o.Pid)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	return err != nil || start == o.Start
}

func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after its last ')' start with field 3.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("owner: /proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// PluginDirPrefix is the prefix of the socket directory of a plugin that
// o starts (os.MkdirTemp adds the rest).
func PluginDirPrefix(o Owner) string { return "gobtl-plugin-" + o.String() + "-" }

// socketRoom is what gobtl's names take below the temp directory: a
// plugin's socket directory (PluginDirPrefix and os.MkdirTemp's digits)
// and go-plugin's socket name inside it, about 60 bytes; the launcher's
// boot directory and socket take less.
const socketRoom = 64

// maxSocketPath is the longest path a unix socket may have on Linux:
// sun_path holds 108 bytes, the terminating NUL included.
const maxSocketPath = 107

// TempDir is the directory in which gobtl makes the directories of its
// unix sockets (the launcher's boot socket, a plugin's socket):
// os.TempDir(), unless a socket below it would be longer than the kernel
// allows — batch systems often set a long per-job TMPDIR — and then /tmp.
// Everything else gobtl makes (and `gobtl clean` sweeps) goes there too,
// so that one directory holds it all.
func TempDir() string {
	dir := os.TempDir()
	if len(dir)+socketRoom <= maxSocketPath {
		return dir
	}
	if st, err := os.Stat("/tmp"); err == nil && st.IsDir() {
		return "/tmp"
	}
	return dir // then the socket's own error names the path
}
