package launch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/internal/jobfile"
	"github.com/gobtl/gobtl/internal/owner"
	"golang.org/x/sys/unix"
)

// What a job leaves in the file system, and who cleans it up.
//
// A running job needs names only while its processes find each other:
// the bootstrap socket until every rank has said hello, a shared-memory
// segment or mailbox until every rank has mapped it. The launcher removes
// its boot directory after the last hello, and the transports unlink
// their files after the mapping fence (core.Attacher), so a job killed
// later — the launcher by SIGKILL, a rank, the whole machine's processes
// — leaves nothing. What a job killed during start-up leaves carries its
// owner in its name: the boot directory is
// gobtl-boot-<pid>-<start>-<random>, the launcher's process id and start
// time (which tell a dead launcher from a live process that got its pid)
// and a random part, and a plugin's socket directory
// gobtl-plugin-<pid>-<start>-*. The boot directory's name does not give
// the job id away — from it another user could tell when the job starts
// and what its files would be called (issue 30 item 1) — so the id is in
// a file inside it, which only the owner can read. The next `gobtl run`
// removes what dead owners left (SweepStale), and `gobtl clean` (Clean) also what no
// launcher owned: shared-memory files of jobs started by another engine
// that no process of this user maps or holds open.

// ownedName matches the names that carry an owner: a launcher's boot
// directory, gobtl-boot-<pid>-<start>-<random> (and, from before it hid
// the job id, gobtl-<job>-<pid>-<start>, job ids of `gobtl run` being
// hex), and a plugin's socket directory, gobtl-plugin-<pid>-<start>-<random>.
var ownedName = regexp.MustCompile(`^gobtl-(?:([0-9a-f]+)|plugin|(boot))-([0-9]+)-([0-9]+)(?:-[^/]*)?$`)

// oldName matches the boot directories of launchers, gobtl-<job>-<n>, and
// the socket directories of plugins, gobtl-plugin-<n>, from before owners
// were named: Clean asks their sockets whether anyone still listens.
var oldName = regexp.MustCompile(`^gobtl-(?:[0-9a-f]{12}|plugin)-[0-9]+$`)

// abandoned tells whether nobody listens on any socket in dir: it has
// sockets and all refuse, or it has none and is older than OrphanAge.
func abandoned(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	sockets := 0
	for _, e := range ents {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		sockets++
		c, err := net.Dial("unix", filepath.Join(dir, e.Name()))
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return false
		}
	}
	if sockets > 0 {
		return true
	}
	st, err := os.Stat(dir)
	return err == nil && time.Since(st.ModTime()) > OrphanAge
}

// BootDirPrefix is the start of the name of a boot directory owned by o;
// jobfile.Mkdir adds a random part.
func BootDirPrefix(o owner.Owner) string { return "gobtl-boot-" + o.String() + "-" }

// jobFile names the file in a boot directory that holds the job's id.
const jobFile = "job"

// jobID is what a job id of `gobtl run` looks like (NewJobID).
var jobID = regexp.MustCompile(`^[0-9a-f]{1,32}$`)

// makeBootDir makes the launcher's boot directory in parent — a new one,
// 0700, under a name that says nothing of the job — and writes the job's
// id into it for Clean.
func makeBootDir(parent, job string) (string, error) {
	dir, err := jobfile.Mkdir(parent, BootDirPrefix(owner.Self()))
	if err != nil {
		return "", fmt.Errorf("launch: boot directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, jobFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		_, err = f.WriteString(job)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("launch: boot directory: %w", err)
	}
	return dir, nil
}

// bootJob reads the job id in the boot directory dir: "" unless the file
// is there, this user's own (jobfile.Check) and holds a job id.
func bootJob(dir string) string {
	f, err := os.OpenFile(filepath.Join(dir, jobFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if jobfile.Check(f) != nil {
		return ""
	}
	b := make([]byte, 64)
	n, _ := f.Read(b)
	if job := string(b[:n]); jobID.MatchString(job) {
		return job
	}
	return ""
}

// OrphanAge is how old a file that no process holds must be before Clean
// takes it for an orphan: a job's files exist only while it starts, and a
// process that has just created one may not be seen holding it by a scan
// of /proc that passed it a moment before.
var OrphanAge = 30 * time.Second

// CleanOptions says where to look.
type CleanOptions struct {
	// TempDir holds boot and plugin directories; "" means owner.TempDir().
	TempDir string
	// ShmDir holds shared-memory files; "" means /dev/shm.
	ShmDir string
	// Orphans also removes gobtl files in ShmDir that belong to no
	// launcher's job and that no process maps or holds open (`gobtl
	// clean`). It reads every process's maps, so SweepStale leaves it
	// out.
	Orphans bool
}

// Clean removes, of this user's files only, what jobs and plugins whose
// owner is dead left behind and returns the paths it removed. It never
// touches the files of a live owner's job.
func Clean(o CleanOptions) ([]string, error) {
	if o.TempDir == "" {
		o.TempDir = owner.TempDir()
	}
	if o.ShmDir == "" {
		o.ShmDir = "/dev/shm"
	}
	var s sweep
	live, dead, err := s.bootDirs(o)
	if err != nil {
		return nil, err
	}
	s.shmFiles(o, live, dead)
	return s.removed, errors.Join(s.errs...)
}

// sweep is one Clean's tally: what it removed and what it could not.
type sweep struct {
	removed []string
	errs    []error
}

func (s *sweep) remove(path string) {
	if err := os.RemoveAll(path); err != nil {
		s.errs = append(s.errs, err)
		return
	}
	s.removed = append(s.removed, path)
}

// bootDirs removes the boot directories of dead launchers in o.TempDir
// and returns the jobs of live and of dead ones.
func (s *sweep) bootDirs(o CleanOptions) (live, dead map[string]bool, err error) {
	live, dead = map[string]bool{}, map[string]bool{}
	ents, err := os.ReadDir(o.TempDir)
	if err != nil {
		return nil, nil, fmt.Errorf("launch: clean: %w", err)
	}
	for _, e := range ents {
		m := ownedName.FindStringSubmatch(e.Name())
		if o.Orphans && m == nil && e.IsDir() && oldName.MatchString(e.Name()) {
			if dir := filepath.Join(o.TempDir, e.Name()); mine(dir) && abandoned(dir) {
				s.remove(dir)
			}
			continue
		}
		if m == nil || !e.IsDir() || !mine(filepath.Join(o.TempDir, e.Name())) {
			continue
		}
		dir := filepath.Join(o.TempDir, e.Name())
		job := m[1]
		if m[2] != "" {
			job = bootJob(dir)
		}
		pid, _ := strconv.Atoi(m[3])
		start, _ := strconv.ParseUint(m[4], 10, 64)
		if (owner.Owner{Pid: pid, Start: start}).Alive() {
			if job != "" {
				live[job] = true
			}
			continue
		}
		if job != "" {
			dead[job] = true
		}
		s.remove(dir)
	}
	return live, dead, nil
}

// shmFiles removes the files of dead jobs in o.ShmDir, and with
// o.Orphans those of no job that no process holds.
func (s *sweep) shmFiles(o CleanOptions, live, dead map[string]bool) {
	ents, err := os.ReadDir(o.ShmDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.errs = append(s.errs, fmt.Errorf("launch: clean: %w", err))
	}
	var held map[fileID]bool
	for _, e := range ents {
		name, path := e.Name(), filepath.Join(o.ShmDir, e.Name())
		if !strings.HasPrefix(name, "gobtl-") || !mine(path) || ofJob(name, live) {
			continue
		}
		if ofJob(name, dead) {
			s.remove(path)
			continue
		}
		// softrc's shared links belong to no job: every job on the host
		// that names the link maps the one file, and the first to come
		// sets a leftover up afresh.
		if !o.Orphans || !e.Type().IsRegular() || strings.HasPrefix(name, "gobtl-softrc-link.") {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < OrphanAge {
			continue
		}
		if held == nil {
			held = heldFiles()
		}
		if id, ok := idOf(path); ok && !held[id] {
			s.remove(path)
		}
	}
}

// SweepStale is what `gobtl run` does before it starts a job: Clean
// without orphans, so that a launcher killed during start-up costs no
// more than one start-up's files until the next job.
func SweepStale(tempDir, shmDir string) ([]string, error) {
	return Clean(CleanOptions{TempDir: tempDir, ShmDir: shmDir})
}

// ofJob tells whether a file in the shared-memory directory belongs to
// one of jobs (boot.ShmPrefix; EXTOLL's files share the prefix).
func ofJob(name string, jobs map[string]bool) bool {
	for j := range jobs {
		if strings.HasPrefix(name, boot.ShmPrefix(j)) {
			return true
		}
	}
	return false
}

// mine tells whether this user owns path (not following a symlink).
func mine(path string) bool {
	var st syscall.Stat_t
	return syscall.Lstat(path, &st) == nil && int(st.Uid) == os.Getuid()
}

type fileID struct{ dev, ino uint64 }

func idOf(path string) (fileID, bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

// heldFiles is every file some process this user can look at maps or
// holds open, by device and inode (what fuser(1) reads).
func heldFiles() map[fileID]bool {
	held := map[fileID]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name())
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			if id, ok := idOf(filepath.Join(dir, "fd", fd.Name())); ok {
				held[id] = true
			}
		}
		maps, err := os.ReadFile(filepath.Join(dir, "maps"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(maps), "\n") {
			// address perms offset major:minor inode path
			f := strings.Fields(line)
			if len(f) < 6 || f[4] == "0" {
				continue
			}
			maj, min, ok := strings.Cut(f[3], ":")
			ma, err1 := strconv.ParseUint(maj, 16, 32)
			mi, err2 := strconv.ParseUint(min, 16, 32)
			ino, err3 := strconv.ParseUint(f[4], 10, 64)
			if !ok || err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			held[fileID{unix.Mkdev(uint32(ma), uint32(mi)), ino}] = true
		}
	}
	return held
}
