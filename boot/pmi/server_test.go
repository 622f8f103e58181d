package pmi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// engine is a fake PMI server in the manner of Slurm's mpi/pmi2 plugin and
// hydra's proxy: it speaks PMI-2 or PMI-1 as each client's init asks, keeps
// one write-once key-value space, and holds the limits the real ones hold
// (keys of 64 bytes, values of 1024, PMI-1 lines of 1024), failing a
// client that breaks one. Like hydra's PMI-2, a kvs-get of a key nobody
// put waits for the next fence instead of failing.
type engine struct {
	t       *testing.T
	size    int
	job     string
	noV2    bool   // a PMI-1-only engine
	mapping string // PMI_process_mapping, "" for none

	mu       sync.Mutex
	cond     *sync.Cond
	kv       map[string]string
	puts     int
	arrived  int
	round    int
	aborts   []string // "rank exitcode isworld msg"
	finals   []int
	versions map[int]int // rank -> version spoken
	errs     []error
}

func newEngine(t *testing.T, size int) *engine {
	e := &engine{t: t, size: size, job: "kvs_" + strings.ReplaceAll(t.Name(), "/", "_"), kv: map[string]string{}, versions: map[int]int{}}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// socketpair returns two connected stream sockets as files: the engine's
// end and the rank's, as a launcher creates them before the fork.
func socketpair(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "engine"), os.NewFile(uintptr(fds[1]), "rank")
}

// conn turns one end of a socketpair into a net.Conn.
func conn(t *testing.T, f *os.File) net.Conn {
	t.Helper()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { c.Close() })
	return c
}

// serve speaks PMI with one rank on c until the rank finalizes, aborts,
// breaks a limit or hangs up.
func (e *engine) serve(c net.Conn, rank int) {
	defer c.Close()
	s := &session{e: e, c: c, r: bufio.NewReader(c), rank: rank, ver: 1}
	for {
		line, ok := s.readLine()
		if !ok {
			return
		}
		cmd, args := s.parse(line)
		if !s.handle(cmd, args, line) {
			return
		}
	}
}

// session is one rank's connection to the engine, in the PMI version its
// init chose (1 until then).
type session struct {
	e    *engine
	c    net.Conn
	r    *bufio.Reader
	rank int
	ver  int
}

// fail records a protocol error of the rank's.
func (s *session) fail(format string, args ...any) {
	s.e.mu.Lock()
	s.e.errs = append(s.e.errs, fmt.Errorf("engine, rank %d: "+format, append([]any{s.rank}, args...)...))
	s.e.mu.Unlock()
}

// reply sends a command with its key-value pairs: a PMI-1 line, or a
// PMI-2 message behind its 6-character length.
func (s *session) reply(cmd string, kv ...string) {
	var b strings.Builder
	if s.ver == 1 {
		b.WriteString("cmd=" + cmd)
		for i := 0; i < len(kv); i += 2 {
			b.WriteString(" " + kv[i] + "=" + kv[i+1])
		}
		b.WriteString("\n")
		io.WriteString(s.c, b.String())
		return
	}
	b.WriteString("cmd=" + cmd + ";")
	for i := 0; i < len(kv); i += 2 {
		b.WriteString(kv[i] + "=" + kv[i+1] + ";")
	}
	fmt.Fprintf(s.c, "%-6d%s", b.Len(), b.String())
}

// readLine reads the next command: a PMI-1 line (of 1024 bytes at most)
// or a PMI-2 message. It returns false at the end of the stream or on a
// broken limit.
func (s *session) readLine() (string, bool) {
	if s.ver == 1 {
		l, err := s.r.ReadString('\n')
		if err != nil {
			return "", false
		}
		if len(l) > 1024 {
			s.fail("a PMI-1 line of %d bytes", len(l))
			return "", false
		}
		return strings.TrimSuffix(l, "\n"), true
	}
	var hdr [6]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return "", false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil {
		s.fail("length %q", hdr)
		return "", false
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(s.r, body); err != nil {
		return "", false
	}
	return string(body), true
}

// parse splits a command into its name and its arguments (PMI-1 separates
// them with spaces, PMI-2 with semicolons).
func (s *session) parse(line string) (string, map[string]string) {
	sep := " "
	if s.ver == 2 {
		sep = ";"
	}
	args := map[string]string{}
	cmd := ""
	for _, tok := range strings.Split(line, sep) {
		if tok == "" {
			continue
		}
		k, v, _ := strings.Cut(tok, "=")
		if k == "cmd" {
			cmd = v
		} else {
			args[k] = v
		}
	}
	return cmd, args
}

// handle answers one command; it returns false when the session ends.
func (s *session) handle(cmd string, args map[string]string, line string) bool {
	e := s.e
	switch cmd {
	case "init":
		s.init(args)
	case "fullinit":
		if args["pmirank"] != strconv.Itoa(s.rank) || args["pmijobid"] == "" || args["threaded"] == "" {
			s.fail("fullinit %v", args)
		}
		s.reply("fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", strconv.Itoa(s.rank), "size", strconv.Itoa(e.size), "appnum", "-1")
	case "job-getid":
		s.reply("job-getid-response", "rc", "0", "jobid", e.job)
	case "get_maxes":
		s.reply("maxes", "kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")
	case "get_my_kvsname":
		s.reply("my_kvsname", "kvsname", e.job)
	case "info-getjobattr":
		if args["key"] == "PMI_process_mapping" && e.mapping != "" {
			s.reply("info-getjobattr-response", "rc", "0", "found", "TRUE", "value", e.mapping)
		} else {
			s.reply("info-getjobattr-response", "rc", "0", "found", "FALSE")
		}
	case "kvs-put", "put":
		return s.put(args)
	case "kvs-fence", "barrier_in":
		s.fence()
	case "kvs-get", "get":
		s.get(args)
	case "abort":
		e.mu.Lock()
		e.aborts = append(e.aborts, fmt.Sprintf("%d %s %s %s", s.rank, args["exitcode"], args["isworld"], args["msg"]))
		e.mu.Unlock()
		return false
	case "finalize":
		e.mu.Lock()
		e.finals = append(e.finals, s.rank)
		e.mu.Unlock()
		if s.ver == 2 {
			s.reply("finalize-response", "rc", "0")
		} else {
			s.reply("finalize_ack")
		}
		return false
	default:
		s.fail("unknown command %q", line)
		return false
	}
	return true
}

// init answers the version the rank asks for, or PMI-1 from an engine
// without PMI-2, and speaks it from then on.
func (s *session) init(args map[string]string) {
	want, _ := strconv.Atoi(args["pmi_version"])
	if want == 2 && s.e.noV2 {
		s.ver = 1
		s.reply("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1")
		return
	}
	s.reply("response_to_init", "pmi_version", args["pmi_version"], "pmi_subversion", args["pmi_subversion"], "rc", "0")
	s.ver = want
	s.e.mu.Lock()
	s.e.versions[s.rank] = s.ver
	s.e.mu.Unlock()
}

// put stores a key once: a second put of it, or one to another key-value
// space, is an error; one over the limits ends the session.
func (s *session) put(args map[string]string) bool {
	e := s.e
	k, v := args["key"], args["value"]
	if s.ver == 1 && args["kvsname"] != e.job {
		s.fail("put to kvs %q", args["kvsname"])
	}
	e.mu.Lock()
	_, dup := e.kv[k]
	if !dup {
		e.kv[k] = v
		e.puts++
	}
	e.mu.Unlock()
	switch {
	case len(k) > 64 || len(v) > 1024:
		s.fail("put of a %d-byte key and a %d-byte value", len(k), len(v))
		return false
	case dup:
		s.fail("put of %s twice", k)
	}
	if s.ver == 2 {
		s.reply("kvs-put-response", "rc", "0")
	} else {
		s.reply("put_result", "rc", "0", "msg", "success")
	}
	return true
}

// fence waits until every rank has arrived.
func (s *session) fence() {
	e := s.e
	e.mu.Lock()
	round := e.round
	e.arrived++
	if e.arrived == e.size {
		e.arrived, e.round = 0, e.round+1
		e.cond.Broadcast()
	}
	for e.round == round {
		e.cond.Wait()
	}
	e.mu.Unlock()
	if s.ver == 2 {
		s.reply("kvs-fence-response", "rc", "0")
	} else {
		s.reply("barrier_out", "rc", "0")
	}
}

// get answers a key: PMI-1 finds PMI_process_mapping among the keys, and
// a PMI-2 get of a key nobody put waits for a fence that brings it.
func (s *session) get(args map[string]string) {
	e := s.e
	k := args["key"]
	if s.ver == 1 && k == "PMI_process_mapping" {
		if e.mapping != "" {
			s.reply("get_result", "rc", "0", "value", e.mapping)
		} else {
			s.reply("get_result", "rc", "-1", "msg", "key_not_found")
		}
		return
	}
	e.mu.Lock()
	v, ok := e.kv[k]
	for !ok && s.ver == 2 {
		e.cond.Wait() // hydra: wait for a fence that brings it
		v, ok = e.kv[k]
	}
	e.mu.Unlock()
	switch {
	case s.ver == 2:
		s.reply("kvs-get-response", "rc", "0", "found", "TRUE", "value", v)
	case ok:
		s.reply("get_result", "rc", "0", "msg", "success", "value", v)
	default:
		s.reply("get_result", "rc", "-1", "msg", "key_not_found")
	}
}

// check fails the test with what the engine saw go wrong.
func (e *engine) check() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		e.t.Error(err)
	}
}
