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

// serve answers one rank's connection until it closes.
func (e *engine) serve(c net.Conn, rank int) {
	defer c.Close()
	r := bufio.NewReader(c)
	ver := 1
	fail := func(format string, args ...any) {
		e.mu.Lock()
		e.errs = append(e.errs, fmt.Errorf("engine, rank %d: "+format, append([]any{rank}, args...)...))
		e.mu.Unlock()
	}
	reply := func(cmd string, kv ...string) {
		var b strings.Builder
		if ver == 1 {
			b.WriteString("cmd=" + cmd)
			for i := 0; i < len(kv); i += 2 {
				b.WriteString(" " + kv[i] + "=" + kv[i+1])
			}
			b.WriteString("\n")
			io.WriteString(c, b.String())
			return
		}
		b.WriteString("cmd=" + cmd + ";")
		for i := 0; i < len(kv); i += 2 {
			b.WriteString(kv[i] + "=" + kv[i+1] + ";")
		}
		fmt.Fprintf(c, "%-6d%s", b.Len(), b.String())
	}
	for {
		var line string
		if ver == 1 {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if len(l) > 1024 {
				fail("a PMI-1 line of %d bytes", len(l))
				return
			}
			line = strings.TrimSuffix(l, "\n")
		} else {
			var hdr [6]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
			if err != nil {
				fail("length %q", hdr)
				return
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			line = string(body)
		}
		sep := " "
		if ver == 2 {
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
		switch cmd {
		case "init":
			want, _ := strconv.Atoi(args["pmi_version"])
			if want == 2 && e.noV2 {
				ver = 1
				reply("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1")
				continue
			}
			reply("response_to_init", "pmi_version", args["pmi_version"], "pmi_subversion", args["pmi_subversion"], "rc", "0")
			ver = want
			e.mu.Lock()
			e.versions[rank] = ver
			e.mu.Unlock()
		case "fullinit":
			if args["pmirank"] != strconv.Itoa(rank) || args["pmijobid"] == "" || args["threaded"] == "" {
				fail("fullinit %v", args)
			}
			reply("fullinit-response", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", strconv.Itoa(rank), "size", strconv.Itoa(e.size), "appnum", "-1")
		case "job-getid":
			reply("job-getid-response", "rc", "0", "jobid", e.job)
		case "get_maxes":
			reply("maxes", "kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")
		case "get_my_kvsname":
			reply("my_kvsname", "kvsname", e.job)
		case "info-getjobattr":
			if args["key"] == "PMI_process_mapping" && e.mapping != "" {
				reply("info-getjobattr-response", "rc", "0", "found", "TRUE", "value", e.mapping)
			} else {
				reply("info-getjobattr-response", "rc", "0", "found", "FALSE")
			}
		case "kvs-put", "put":
			k, v := args["key"], args["value"]
			if ver == 1 && args["kvsname"] != e.job {
				fail("put to kvs %q", args["kvsname"])
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
				fail("put of a %d-byte key and a %d-byte value", len(k), len(v))
				return
			case dup:
				fail("put of %s twice", k)
			}
			if ver == 2 {
				reply("kvs-put-response", "rc", "0")
			} else {
				reply("put_result", "rc", "0", "msg", "success")
			}
		case "kvs-fence", "barrier_in":
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
			if ver == 2 {
				reply("kvs-fence-response", "rc", "0")
			} else {
				reply("barrier_out", "rc", "0")
			}
		case "kvs-get", "get":
			k := args["key"]
			if ver == 1 && k == "PMI_process_mapping" {
				if e.mapping != "" {
					reply("get_result", "rc", "0", "value", e.mapping)
				} else {
					reply("get_result", "rc", "-1", "msg", "key_not_found")
				}
				continue
			}
			e.mu.Lock()
			v, ok := e.kv[k]
			for !ok && ver == 2 {
				e.cond.Wait() // hydra: wait for a fence that brings it
				v, ok = e.kv[k]
			}
			e.mu.Unlock()
			switch {
			case ver == 2:
				reply("kvs-get-response", "rc", "0", "found", "TRUE", "value", v)
			case ok:
				reply("get_result", "rc", "0", "msg", "success", "value", v)
			default:
				reply("get_result", "rc", "-1", "msg", "key_not_found")
			}
		case "abort":
			e.mu.Lock()
			e.aborts = append(e.aborts, fmt.Sprintf("%d %s %s %s", rank, args["exitcode"], args["isworld"], args["msg"]))
			e.mu.Unlock()
			return
		case "finalize":
			e.mu.Lock()
			e.finals = append(e.finals, rank)
			e.mu.Unlock()
			if ver == 2 {
				reply("finalize-response", "rc", "0")
			} else {
				reply("finalize_ack")
			}
			return
		default:
			fail("unknown command %q", line)
			return
		}
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
