package softrc

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/internal/jobfile"
)

// A shared link: ports of several processes on one host that stand for
// one physical port share its link rate. Two jobs whose ranks run on the
// same nodes and use the same HCA port compete for that port's bandwidth
// (seed 001 §6.3, Fig. 20: a second program loads one rail). softrc gives
// every process its own device, so without this each would get a full
// link of its own.
//
// The link is a small file in /dev/shm mapped by every process on it; it
// holds the token bucket's state, guarded by a spin lock (the critical
// sections are a few instructions). The bucket's clock is CLOCK_MONOTONIC,
// which all processes of a host share. A shared flock(2) on the file
// marks who is attached: the first process to attach initialises the
// bucket, the last to leave removes the file, and a process that dies
// leaves neither a lock nor a stale rate behind (the kernel drops its
// flock; its spin lock, if it died holding it, is taken over).

// sharedLinkDir is where shared links live.
var sharedLinkDir = "/dev/shm"

const (
	linkMagic   = 0x4c435253 // "SRCL"
	linkFileLen = 64
	// Offsets in the file: magic, lock (holder's pid), rate (bytes/s),
	// then the bucketState.
	offMagic = 0
	offLock  = 4
	offRate  = 8
	offState = 16
)

type sharedLink struct {
	name string
	path string
	fd   int
	mem  []byte
	pid  uint32
}

// monoBase converts the device clock (nowNS) to CLOCK_MONOTONIC.
var monoBase = sync.OnceValue(func() int64 { return monotonic() - nowNS() })

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// linkPath is the file of the link called name.
func linkPath(name string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, name)
	dir := sharedLinkDir
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "gobtl-softrc-link."+clean)
}

// openSharedBucket attaches to the shared link called name at rate bytes/s
// and returns a bucket on it. Every process on a link must give it the
// same rate.
func openSharedBucket(name string, rate float64) (*bucket, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("softrc: shared link %q needs a rate", name)
	}
	l, err := attachLink(name, rate)
	if err != nil {
		return nil, err
	}
	b := &bucket{rate: rate / 1e9, burst: burstOf(rate), link: l}
	b.st = (*bucketState)(unsafe.Pointer(&l.mem[offState]))
	return b, nil
}

func attachLink(name string, rate float64) (*sharedLink, error) {
	path := linkPath(name)
	for attempt := 0; ; attempt++ {
		l, retry, err := tryAttach(name, path, rate)
		if err == nil || !retry || attempt == 10 {
			return l, err
		}
	}
}

// tryAttach attaches to the file at path; retry says the file was removed
// under it by the last process leaving, and a new one should be made.
func tryAttach(name, path string, rate float64) (*sharedLink, bool, error) {
	fail := func(err error) (*sharedLink, bool, error) {
		return nil, false, fmt.Errorf("softrc: shared link %q (%s): %w", name, path, err)
	}
	// The name is shared by design — every job of this user on the host
	// that names the link maps the one file — so it cannot be random;
	// but what stands there must be this user's own file, reached
	// through no link (a planted link made root truncate another file,
	// issue 30 item 1).
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fail(err)
	}
	if err := jobfile.CheckFD(fd, path); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	l := &sharedLink{name: name, path: path, fd: fd, pid: uint32(os.Getpid())}
	first := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil
	if first {
		if err := unix.Ftruncate(fd, linkFileLen); err != nil {
			unix.Close(fd)
			return fail(err)
		}
	} else if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	// The file may have been removed by the last process leaving between
	// our open and our lock: then attach to a new one.
	var st, cur unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Stat(path, &cur) != nil || st.Ino != cur.Ino || st.Size < linkFileLen {
		unix.Close(fd)
		return nil, true, fmt.Errorf("softrc: shared link %q: %s was replaced while attaching", name, path)
	}
	mem, err := unix.Mmap(fd, 0, linkFileLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return fail(err)
	}
	l.mem = mem
	if first {
		// Nobody else is attached: whatever the file holds is from a
		// run that is over.
		st := (*bucketState)(unsafe.Pointer(&mem[offState]))
		st.tokens, st.last, st.waiting = idleCredit, monotonic(), 0
		*(*uint64)(unsafe.Pointer(&mem[offRate])) = math.Float64bits(rate)
		atomic.StoreUint32(l.word(offLock), 0)
		atomic.StoreUint32(l.word(offMagic), linkMagic)
		if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
			l.close()
			return fail(err)
		}
		return l, false, nil
	}
	if atomic.LoadUint32(l.word(offMagic)) != linkMagic {
		l.close()
		return fail(fmt.Errorf("not a softrc link file"))
	}
	l.lock(0)
	have := math.Float64frombits(*(*uint64)(unsafe.Pointer(&mem[offRate])))
	l.unlock()
	if have != rate {
		l.close()
		return fail(fmt.Errorf("the link runs at %.0f B/s and this port says %.0f B/s; every port on a link must give the same rate", have, rate))
	}
	return l, false, nil
}

func (l *sharedLink) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&l.mem[off])) }

// lock takes the link's spin lock and returns now (device clock) on the
// link's clock. A holder that died (checked every thousand yields) is
// taken over.
func (l *sharedLink) lock(now int64) int64 {
	w := l.word(offLock)
	for spins := 0; !atomic.CompareAndSwapUint32(w, 0, l.pid); spins++ {
		if spins < 100 {
			continue
		}
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		if spins%1000 == 0 {
			holder := atomic.LoadUint32(w)
			if holder != 0 && unix.Kill(int(holder), 0) == unix.ESRCH {
				atomic.CompareAndSwapUint32(w, holder, 0)
			}
		}
	}
	return now + monoBase()
}

func (l *sharedLink) unlock() { atomic.StoreUint32(l.word(offLock), 0) }

// close detaches; the last process on the link removes its file.
func (l *sharedLink) close() {
	if l.mem != nil {
		unix.Munmap(l.mem)
		l.mem = nil
	}
	if unix.Flock(l.fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
		unix.Unlink(l.path)
	}
	unix.Close(l.fd)
}
