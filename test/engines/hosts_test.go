package engines

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A host is one "host" of a test on this machine: a network namespace
// with its own address on a veth link to the other host, and a UTS
// namespace with its own hostname (`ip netns exec` alone keeps the
// machine's). A process runs on the host under Enter.
type host struct {
	name string // hostname, and the network namespace's name
	addr string // its address on the link
	uts  string // the file that holds its UTS namespace
}

// Enter is the command line that runs what follows it on h: in its
// network namespace (with /etc/netns/<name>/hosts as /etc/hosts, which
// names both hosts) and its UTS namespace.
func (h host) Enter() []string {
	return []string{"ip", "netns", "exec", h.name, "nsenter", "--uts=" + h.uts}
}

// twoHosts are two hosts joined by a veth pair, and an rsh agent for
// mpirun that runs a command on either (as ssh would: the words joined
// and given to a shell).
type twoHosts struct {
	a, b   host
	subnet string
	agent  string
}

// hostsRun is where the UTS namespace files live, one per host; a run
// that died leaves its own behind, which the next run removes (sweep).
const hostsRun = "/run/gobtl-hosts"

var hostSeq atomic.Int64

// hostName is gb<pid>n<seq><a|b>: unique on the machine while this test
// binary lives (at most 15 bytes, so it also names the veth ends), and
// telling sweep whose it is.
var hostName = regexp.MustCompile(`^gb(\d+)n\d+[ab]$`)

// newTwoHosts makes two hosts for t and removes them when t ends, passed
// or failed. It skips t where namespaces cannot be made.
func newTwoHosts(t testing.TB) *twoHosts {
	t.Helper()
	needRoot(t)
	needCommands(t, "ip", "nsenter", "unshare")
	sweep()
	seq, pid := hostSeq.Add(1), os.Getpid()
	id := fmt.Sprintf("gb%dn%d", pid, seq)
	// Each pair of hosts is a world of its own (the link joins only its
	// two namespaces), yet two runs get different subnets, so that a log
	// line names one run.
	net := fmt.Sprintf("10.%d.%d", 16+pid%200, seq%250)
	h := &twoHosts{
		a:      host{name: id + "a", addr: net + ".1", uts: filepath.Join(hostsRun, id+"a")},
		b:      host{name: id + "b", addr: net + ".2", uts: filepath.Join(hostsRun, id+"b")},
		subnet: net + ".0/24",
	}
	t.Cleanup(func() { removeHost(h.a.name); removeHost(h.b.name) })
	must := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			if strings.Contains(string(out), "Operation not permitted") {
				t.Skipf("engines: cannot make namespaces here: %s: %s", strings.Join(args, " "), out)
			}
			t.Fatalf("engines: %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.MkdirAll(hostsRun, 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := fmt.Sprintf("127.0.0.1 localhost\n%s %s\n%s %s\n", h.a.addr, h.a.name, h.b.addr, h.b.name)
	for _, x := range []host{h.a, h.b} {
		must("ip", "netns", "add", x.name)
		must("ip", "-n", x.name, "link", "set", "lo", "up")
		if err := os.MkdirAll(filepath.Join("/etc/netns", x.name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("/etc/netns", x.name, "hosts"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(x.uts, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		must("unshare", "--uts="+x.uts, "hostname", x.name)
	}
	must("ip", "link", "add", h.a.name, "netns", h.a.name, "type", "veth", "peer", "name", h.b.name, "netns", h.b.name)
	for _, x := range []host{h.a, h.b} {
		must("ip", "-n", x.name, "addr", "add", x.addr+"/24", "dev", x.name)
		must("ip", "-n", x.name, "link", "set", x.name, "up")
	}
	// The kernel reports a link's operational state up to a second after
	// it is set up (linkwatch); libfabric's IP providers leave out an
	// interface that is not running, so wait until both ends are.
	for _, x := range []host{h.a, h.b} {
		waitRunning(t, x)
	}
	h.agent = filepath.Join(t.TempDir(), "agent")
	script := fmt.Sprintf(`#!/bin/sh
# rsh agent of the two-host test: runs "$2..." on host $1 as ssh would.
h=$1; shift
case $h in
%s|%s) uts=%s/$h ;;
*) echo "agent: no host $h" >&2; exit 255 ;;
esac
exec ip netns exec "$h" nsenter --uts="$uts" sh -c "$*"
`, h.a.name, h.b.name, hostsRun)
	if err := os.WriteFile(h.agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitRunning waits up to 5 s for host x's end of the link to be
// operationally up, and fails the test if it is not.
func waitRunning(t testing.TB, x host) {
	t.Helper()
	state := filepath.Join("/sys/class/net", x.name, "operstate")
	var out []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if out, err = exec.Command("ip", "netns", "exec", x.name, "cat", state).Output(); err == nil && strings.TrimSpace(string(out)) == "up" {
			return
		}
	}
	t.Fatalf("engines: host %s's link is not up after 5 s (operstate %q)", x.name, strings.TrimSpace(string(out)))
}

// mpirun is the engine that starts a job across the hosts from host a,
// placing np ranks as "a:na,b:nb" says, with Open MPI's own traffic
// pinned to the link. The hosts share the machine's cores, which each
// host's daemon believes its own: bound (Open MPI's default), the first
// rank of each host would spin on the same core, and a message across
// hosts would wait for the scheduler's time slice (~1 ms instead of
// ~40 µs), so ranks are not bound.
func (h *twoHosts) mpirun(na, nb int) engine {
	hosts := fmt.Sprintf("%s:%d", h.a.name, na)
	if nb > 0 {
		hosts += fmt.Sprintf(",%s:%d", h.b.name, nb)
	}
	return engine{name: "mpirun-2hosts", pmix: true, needs: []string{"mpirun.openmpi"}, argv: func(_ string, np int) []string {
		return []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
			"--host", hosts, "--map-by", "slot", "--bind-to", "none", "-np", fmt.Sprint(np),
			"--mca", "plm_rsh_agent", h.agent, "--mca", "oob_tcp_if_include", h.subnet, "--mca", "btl_tcp_if_include", h.subnet}
	}}
}

// run starts np ranks of prog under mpirun from host a.
func (h *twoHosts) run(t testing.TB, na, nb int, env []string, prog string, args ...string) result {
	t.Helper()
	e := h.mpirun(na, nb)
	e.need(t)
	return start(t, e, jobName(), h.a.Enter(), append(append(e.argv("", na+nb), prog), args...), env)
}

// removeHost removes a host and everything in it: its processes, its
// namespace (and so its end of the link), its hosts file and its UTS
// namespace.
func removeHost(name string) {
	if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	exec.Command("ip", "netns", "del", name).Run()
	os.RemoveAll(filepath.Join("/etc/netns", name))
	uts := filepath.Join(hostsRun, name)
	syscall.Unmount(uts, syscall.MNT_DETACH)
	os.Remove(uts)
}

// sweep removes the hosts of test runs that died before their cleanup:
// those whose pid no longer runs.
func sweep() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	names := strings.Fields(string(out))
	if ents, err := os.ReadDir(hostsRun); err == nil {
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}
	for _, n := range names {
		m := hostName.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		removeHost(n)
	}
}

// onHost runs a command on h and returns its output.
func (h host) onHost(args ...string) (string, error) {
	cmd := exec.Command(h.Enter()[0], append(h.Enter()[1:], args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
