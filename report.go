package gobtl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/topo"
	"github.com/gobtl/gobtl/plugins"
	"github.com/gobtl/gobtl/pml"
)

// What a rank says about itself: once at start, at info, which transport
// reaches which peers and which policies are in force (Open MPI's
// btl_base_verbose and --report-bindings); and, when the launcher asks
// because the job timed out or was interrupted, where it is blocked and
// what it has pending (mpirun --report-state-on-timeout
// --get-stack-traces).

// report is the last step of Init: the start line, and the communicator
// handed to the state reports.
func (s *start) report(context.Context) error {
	log := s.logs.For("gobtl")
	if e := log.Info(); e.Enabled() {
		routes, unreachable := s.comm.Routes()
		reach := map[string]string{}
		var words []string
		for _, r := range routes {
			reach[r.Module] = rankList(r.Peers)
			words = append(words, fmt.Sprintf("%s reaches %s", r.Module, cmpOr(rankList(r.Peers), "no peer")))
		}
		if len(unreachable) > 0 {
			reach["none"] = rankList(unreachable)
			words = append(words, fmt.Sprintf("no transport reaches %s", rankList(unreachable)))
		}
		pols := s.policiesInForce()
		var pw []string
		for _, k := range core.PolicyKinds {
			if v, ok := pols[string(k)]; ok {
				pw = append(pw, fmt.Sprintf("%s %s", k, v))
			}
		}
		bind := topo.Self().String() // as the launcher or engine bound it
		e.Interface("reach", reach).Interface("policies", pols).Str("binding", bind).
			Msgf("rank %d of %d, %s: %s; %s", s.boot.Rank(), s.boot.Size(), bind, strings.Join(words, ", "), cmpOr(strings.Join(pw, ", "), "no policies"))
	}
	if s.watch != nil {
		s.watch.comm.Store(s.comm)
		s.closers = append(s.closers, s.watch)
	}
	return nil
}

// policiesInForce names each kind's policy and where it comes from: the
// stack's block (built in, or a plugin with its path and version), or the
// default a BTL of the stack runs when the stack names none.
func (s *start) policiesInForce() map[string]string {
	out := map[string]string{}
	for _, c := range s.closers {
		p, ok := c.(*plugins.Policy)
		if !ok {
			continue
		}
		if p.Plugin != nil {
			out[string(p.Kind)] = fmt.Sprintf("%s (plugin %s, version %s)", p.Name, p.Plugin.Path, p.Plugin.Version)
		} else {
			out[string(p.Kind)] = p.Name + " (built in)"
		}
	}
	for _, b := range s.cfg.BTLs {
		for _, k := range core.PolicyKinds {
			if name, ok := b.Component.Defaults[k]; ok && s.cfg.Policy(k) == nil {
				what := fmt.Sprintf("%s (built in, btl %q's default)", name, b.Kind)
				if prev, dup := out[string(k)]; dup && prev != what {
					what = prev + ", " + what
				}
				out[string(k)] = what
			}
		}
	}
	return out
}

// rankList renders ranks compactly, as ranges: "0-3,5,7-9".
func rankList(ranks []int) string {
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	var b strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(rs[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(rs[j]))
		}
		i = j + 1
	}
	return b.String()
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// stateWatch is one rank's part in the state reports: the communicator
// to describe once Init has built it.
type stateWatch struct {
	rank int
	comm atomic.Pointer[pml.Comm]
}

// Close ends the watch: the communicator is gone.
func (w *stateWatch) Close() error {
	w.comm.Store(nil)
	reports.mu.Lock()
	defer reports.mu.Unlock()
	reports.watches = slices.DeleteFunc(reports.watches, func(x *stateWatch) bool { return x == w })
	return nil
}

// reports is the process's line to the launcher for state reports
// (boot.EnvReport): one per process, however many ranks it opens.
var reports struct {
	once    sync.Once
	line    *os.File // nil: not started by gobtl run
	mu      sync.Mutex
	watches []*stateWatch
}

// watchState enrols a rank of a job started by `gobtl run` in the state
// reports: from now on the launcher's boot.ReportSignal makes the process
// write, on stderr, where it is blocked and, once Init is done, the
// rank's pending requests. It returns nil in a job the launcher did not
// start.
func watchState(rank int) *stateWatch {
	reports.once.Do(startReports)
	if reports.line == nil {
		return nil
	}
	w := &stateWatch{rank: rank}
	reports.mu.Lock()
	reports.watches = append(reports.watches, w)
	reports.mu.Unlock()
	return w
}

func startReports() {
	fd, err := strconv.Atoi(os.Getenv(boot.EnvReport))
	if err != nil || fd < 3 {
		return
	}
	syscall.CloseOnExec(fd) // not for the policy plugins this rank starts
	line := os.NewFile(uintptr(fd), "gobtl-report")
	if _, err := io.WriteString(line, boot.ReportReady+"\n"); err != nil {
		return // not the launcher's line after all
	}
	reports.line = line
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, boot.ReportSignal)
	go func() {
		for range sig {
			reports.mu.Lock()
			watches := slices.Clone(reports.watches)
			reports.mu.Unlock()
			// One write, so that ranks reporting at once do not
			// interleave their lines.
			var b bytes.Buffer
			writeState(&b, watches)
			os.Stderr.Write(b.Bytes())
			io.WriteString(line, boot.ReportDone+"\n")
		}
	}()
}

// writeState writes the state report of this process: for each rank it
// runs, where its main goroutine is blocked, its pending requests and the
// main goroutine's stack.
func writeState(w io.Writer, watches []*stateWatch) {
	stacks := allStacks()
	main := mainGoroutine(stacks)
	ranks := make([]string, 0, len(watches))
	for _, wt := range watches {
		ranks = append(ranks, strconv.Itoa(wt.rank))
	}
	fmt.Fprintf(w, "gobtl: rank %s (pid %d) at the launcher's request:\n", cmpOr(strings.Join(ranks, ","), "?"), os.Getpid())
	fmt.Fprintf(w, "  blocked in %s\n", blockedIn(main))
	for _, wt := range watches {
		c := wt.comm.Load()
		if c == nil {
			fmt.Fprintf(w, "  rank %d is still starting (gobtl.Init)\n", wt.rank)
			continue
		}
		c.State(200*time.Millisecond).Report(w, "  ")
	}
	if len(main.frames) > 0 {
		fmt.Fprintf(w, "  main goroutine [%s]:\n", main.state)
		for _, f := range main.frames {
			fmt.Fprintf(w, "    %s (%s)\n", f.fn, f.at)
		}
	}
}

// goroutine is one goroutine of a runtime.Stack dump.
type goroutine struct {
	id     int
	state  string
	frames []frame // innermost first
}

type frame struct{ fn, at string }

func allStacks() []byte {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 8<<20 {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// mainGoroutine parses goroutine 1 out of a runtime.Stack dump of all
// goroutines.
func mainGoroutine(dump []byte) goroutine {
	for _, block := range strings.Split(string(dump), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		var g goroutine
		if _, err := fmt.Sscanf(lines[0], "goroutine %d", &g.id); err != nil || g.id != 1 {
			continue
		}
		if i, j := strings.IndexByte(lines[0], '['), strings.LastIndexByte(lines[0], ']'); i >= 0 && j > i {
			g.state = lines[0][i+1 : j]
		}
		for k := 1; k+1 < len(lines); k += 2 {
			fn := lines[k]
			if strings.HasPrefix(fn, "created by ") {
				break
			}
			if i := strings.LastIndexByte(fn, '('); i > 0 {
				fn = fn[:i]
			}
			at := strings.TrimSpace(lines[k+1])
			if i := strings.LastIndex(at, " +0x"); i > 0 {
				at = at[:i]
			}
			g.frames = append(g.frames, frame{fn: fn, at: at})
		}
		return g
	}
	return goroutine{}
}

// apiPackages are the packages whose exported functions a program calls
// and may block in.
var apiPackages = []string{"github.com/gobtl/gobtl.", "github.com/gobtl/gobtl/pml.", "github.com/gobtl/gobtl/boot."}

// blockedIn names the gobtl call a goroutine waits in: the outermost
// exported function of gobtl's API (gobtl.Init, pml.(*Comm).Recv, ...) in
// the innermost run of gobtl's frames, with the innermost one if it
// differs ("gobtl.Init (inside boot.(*Client).Fence)") and its caller.
// When the goroutine is not in gobtl, its innermost frame outside the
// runtime.
func blockedIn(g goroutine) string {
	const module = "github.com/gobtl/gobtl"
	inner, outer, seen := -1, -1, false
	for i, f := range g.frames {
		inModule := strings.HasPrefix(f.fn, module+"/") || strings.HasPrefix(f.fn, module+".")
		if !inModule {
			if seen {
				break // the first run of gobtl frames is over
			}
			continue
		}
		seen = true
		name := f.fn[strings.LastIndexByte(f.fn, '.')+1:]
		exported := name != "" && name[0] >= 'A' && name[0] <= 'Z'
		if exported && slices.ContainsFunc(apiPackages, func(p string) bool { return strings.HasPrefix(f.fn, p) }) {
			if inner < 0 {
				inner = i
			}
			outer = i
		}
	}
	if outer >= 0 {
		short := func(fn string) string {
			if strings.HasPrefix(fn, module+".") {
				return "gobtl." + strings.TrimPrefix(fn, module+".")
			}
			return strings.TrimPrefix(fn, module+"/")
		}
		s := short(g.frames[outer].fn)
		if inner != outer {
			s += " (inside " + short(g.frames[inner].fn) + ")"
		}
		if outer+1 < len(g.frames) {
			c := g.frames[outer+1]
			s += fmt.Sprintf(", called from %s (%s)", c.fn, c.at)
		}
		return s
	}
	for _, f := range g.frames {
		if !strings.HasPrefix(f.fn, "runtime.") && !strings.HasPrefix(f.fn, "time.") && !strings.HasPrefix(f.fn, "sync.") {
			return fmt.Sprintf("%s (%s), outside gobtl", f.fn, f.at)
		}
	}
	return "an unknown place (no main goroutine in the dump)"
}
