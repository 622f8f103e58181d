package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/internal/owner"
	"github.com/gobtl/gobtl/internal/topo"
)

// Config describes a job.
type Config struct {
	// NP is the number of ranks.
	NP int
	// Prog and Args are the program every rank runs; Prog is looked up in
	// PATH.
	Prog string
	Args []string
	// StackFile is passed to the ranks as boot.EnvConfig when set.
	StackFile string
	// TagOutput prefixes every line a rank prints with "[rank] ".
	TagOutput bool
	// Timeout stops the job when it runs longer; 0 means no limit.
	Timeout time.Duration
	// Grace is how long a rank has between SIGTERM and SIGKILL when the job
	// is stopped; 0 means one second.
	Grace time.Duration
	// ReportWait is how long the launcher waits for the ranks' state
	// reports when the job times out or is interrupted (boot.EnvReport);
	// 0 means three seconds, a negative value asks for none.
	ReportWait time.Duration
	// Env is added to every rank's environment (after the launcher's own).
	Env []string
	// Stdout and Stderr receive the ranks' output; nil means the
	// launcher's. Stdin goes to rank 0 when it is not nil; the other ranks
	// read /dev/null.
	Stdout, Stderr io.Writer
	Stdin          *os.File
	// Report receives the launcher's own messages (which rank failed and
	// how); nil means Stderr.
	Report io.Writer
	// ShmDir is where components create shared-memory files; "" means
	// /dev/shm.
	ShmDir string
	// Place maps the ranks onto this host's cores and binds them.
	Place Placement
}

// Exit says how one rank ended.
type Exit struct {
	Rank   int
	Pid    int
	Code   int            // exit status, -1 when killed by a signal
	Signal syscall.Signal // the signal that killed it, if any
	Abort  string         // the rank's abort message, if it aborted
	Err    error          // the process could not be started or waited for
	// Unfinalized says the rank exited with status 0 after it joined the
	// job (its Init said hello) but without finalizing (its Close): it
	// returned, panicked under a recover or called os.Exit(0) with its
	// communicator open, and its peers may be waiting on it. mpirun
	// counts such a rank as failed ("exiting improperly"); so does the
	// launcher.
	Unfinalized bool
}

func (e Exit) String() string {
	who := fmt.Sprintf("rank %d", e.Rank)
	if e.Pid > 0 {
		who += fmt.Sprintf(" (pid %d)", e.Pid)
	}
	switch {
	case e.Abort != "":
		return fmt.Sprintf("%s aborted: %s", who, e.Abort)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", who, e.Err)
	case e.Signal != 0:
		return fmt.Sprintf("%s was killed by signal %d (%v)", who, int(e.Signal), e.Signal)
	case e.Unfinalized:
		return fmt.Sprintf("%s exited with status %d before Close (without finalizing)", who, e.Code)
	}
	return fmt.Sprintf("%s exited with status %d", who, e.Code)
}

// Status is the shell-style status of the exit: the code, or 128 plus the
// signal number.
func (e Exit) Status() int {
	switch {
	case e.Signal != 0:
		return 128 + int(e.Signal)
	case e.Code > 0:
		return e.Code
	}
	return 1
}

func (e Exit) failed() bool {
	return e.Code != 0 || e.Signal != 0 || e.Abort != "" || e.Err != nil || e.Unfinalized
}

// Result is how a job ended.
type Result struct {
	// Status is the launcher's exit status: 0 when every rank exited 0
	// (having finalized, if it joined the job), otherwise the first
	// failing rank's Status, 124 after the timeout and 130 after an
	// interrupt.
	Status int
	// First is the first rank that failed, if any.
	First *Exit
	// Exits holds every rank's end, by rank.
	Exits []Exit
	// Reason says in words why the job stopped early ("" if it did not).
	Reason string
}

// StatusTimeout and StatusInterrupted are the launcher's own exit statuses.
const (
	StatusTimeout     = 124
	StatusInterrupted = 130
)

// NewJobID returns a fresh job id: random, so that two jobs on one host
// never share a segment name.
func NewJobID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return hex.EncodeToString(b[:])
}

type rankProc struct {
	rank int
	cmd  *exec.Cmd
	pid  int
	// ready is set when the rank said it answers boot.ReportSignal with
	// a state report.
	ready atomic.Bool
}

// Run starts the job and waits for it to end. Canceling ctx stops the job
// (Ctrl-C). The error is for failures of the launcher itself (no such
// program, no socket); how the ranks ended is in Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	prog, err := cfg.complete()
	if err != nil {
		return Result{}, err
	}
	stack, err := stackFile(cfg.StackFile)
	if err != nil {
		return Result{}, err
	}

	// What launchers killed during start-up left; never a live job's.
	if gone, _ := SweepStale("", cfg.ShmDir); len(gone) > 0 {
		fmt.Fprintf(cfg.Report, "gobtl run: removed what dead jobs left: %s (%d in all)\n", gone[0], len(gone))
	}

	job := NewJobID()
	dir, err := makeBootDir(owner.TempDir(), job)
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "boot.sock")
	// Once every rank is connected nobody needs the socket's name: the
	// directory goes at once, so a launcher killed later leaves nothing.
	srv, err := newServer(sock, cfg.NP, job, HelloTimeout, func() { os.RemoveAll(dir) })
	if err != nil {
		return Result{}, err
	}
	defer srv.Close()
	defer removeShm(cfg.ShmDir, job)

	out := newOutputs(cfg)
	masks, placeEnv, err := place(cfg, out.report)
	if err != nil {
		return Result{}, fmt.Errorf("launch: %w", err)
	}
	env := rankEnv{
		base: slices.Concat(os.Environ(), placeEnv, cfg.Env),
		np:   cfg.NP, job: job, sock: sock, stack: stack,
	}
	exits := make(chan Exit, cfg.NP)
	reports := make(chan int, cfg.NP)
	procs, err := startRanks(prog, cfg, env, masks, out, srv, exits, reports)
	if err != nil {
		return Result{}, err
	}

	res := supervise(ctx, cfg, out.report, srv, procs, exits, reports)
	out.drain()
	res.tell(cfg.Report, cfg.NP)
	return res, nil
}

// complete checks cfg and fills in its defaults; it returns the path of
// the program the ranks run.
func (cfg *Config) complete() (string, error) {
	if cfg.NP <= 0 {
		return "", fmt.Errorf("launch: -np %d: need at least one rank", cfg.NP)
	}
	if cfg.Prog == "" {
		return "", errors.New("launch: no program to run")
	}
	prog, err := exec.LookPath(cfg.Prog)
	if err != nil {
		return "", fmt.Errorf("launch: %w", err)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Second
	}
	if cfg.ReportWait == 0 {
		cfg.ReportWait = 3 * time.Second
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Report == nil {
		cfg.Report = cfg.Stderr
	}
	if cfg.ShmDir == "" {
		cfg.ShmDir = "/dev/shm"
	}
	if f, ok := cfg.Stderr.(*os.File); ok && !cfg.TagOutput {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			cfg.Env = append(cfg.Env, boot.EnvStderrTTY+"=1")
		}
	}
	return prog, nil
}

// outputs are the streams the ranks' output is forwarded to, and the
// launcher's own report stream.
type outputs struct {
	stdout, stderr *lockedWriter
	// report is cfg.Report, through the lock of the ranks' stream it is
	// when it is one: while the ranks run, the launcher's own lines take
	// the lock the ranks' output takes.
	report io.Writer
	// fwd counts the forwarders still copying a rank's pipe.
	fwd sync.WaitGroup
}

func newOutputs(cfg Config) *outputs {
	o := &outputs{stdout: &lockedWriter{w: cfg.Stdout}, stderr: &lockedWriter{w: cfg.Stderr}}
	if cfg.Stdout == cfg.Stderr {
		o.stderr = o.stdout
	}
	o.report = cfg.Report
	switch o.report {
	case cfg.Stderr:
		o.report = o.stderr
	case cfg.Stdout:
		o.report = o.stdout
	}
	return o
}

// drain waits, up to a second, for the output still in the pipes: it
// belongs to the job, but a descendant that keeps a pipe open does not
// hold the launcher.
func (o *outputs) drain() {
	done := make(chan struct{})
	go func() { o.fwd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// rankEnv is what every rank's environment holds besides its rank.
type rankEnv struct {
	base             []string
	np               int
	job, sock, stack string
}

// of is rank r's environment.
func (re rankEnv) of(r int) []string {
	env := append(re.base[:len(re.base):len(re.base)],
		boot.EnvRank+"="+strconv.Itoa(r),
		boot.EnvSize+"="+strconv.Itoa(re.np),
		boot.EnvJobID+"="+re.job,
		boot.EnvBoot+"="+re.sock,
	)
	if re.stack != "" {
		env = append(env, boot.EnvConfig+"="+re.stack)
	}
	return env
}

// startRanks starts every rank, each waited for on its own goroutine
// that sends its Exit to exits. If one cannot start, it stops those
// already running and waits for them before it returns the error.
func startRanks(prog string, cfg Config, env rankEnv, masks []topo.CPUs, out *outputs, srv *Server, exits chan Exit, reports chan<- int) ([]*rankProc, error) {
	procs := make([]*rankProc, 0, cfg.NP)
	for r := range cfg.NP {
		p, err := start(prog, cfg, r, env.of(r), masks, out.stdout, out.stderr, &out.fwd, reports)
		if err != nil {
			// The ranks that started wait on a fence that will never
			// complete.
			srv.Fail("the launcher could not start every rank")
			signalAll(procs, syscall.SIGKILL)
			for range procs {
				<-exits
			}
			return nil, err
		}
		procs = append(procs, p)
		go func() { exits <- wait(p) }()
	}
	return procs, nil
}

// tell reports why the job stopped early, if it did.
func (res *Result) tell(w io.Writer, np int) {
	if res.Reason != "" {
		fmt.Fprintf(w, "gobtl run: %s\n", res.Reason)
	}
	if res.First != nil {
		fmt.Fprintf(w, "gobtl run: %v; job of %d ranks stopped\n", *res.First, np)
	}
}

// supervise waits for every rank to end, stopping the job at the first
// failure, interrupt or timeout. Before it stops a job that timed out or
// was interrupted, it asks the ranks that can for a report of their state
// (boot.EnvReport) and waits for them, up to cfg.ReportWait.
func supervise(ctx context.Context, cfg Config, report io.Writer, srv *Server, procs []*rankProc, exits <-chan Exit, reports <-chan int) Result {
	s := &supervisor{cfg: cfg, report: report, srv: srv, procs: procs}
	s.res.Exits = make([]Exit, len(procs))
	var timeout <-chan time.Time
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	alive := len(procs)
	aborts := srv.Aborts()
	ctxDone := ctx.Done()
	for alive > 0 {
		select {
		case e := <-exits:
			alive--
			s.exited(e)
		case r := <-reports:
			s.heard(r)
		case a := <-aborts:
			if s.res.blame(a, procs[a.Rank].cmd.Process.Pid) {
				s.stop(s.res.First.String())
			}
		case <-ctxDone:
			ctxDone = nil
			s.interrupted()
		case <-timeout:
			s.timedOut()
		case <-s.reportEnd:
			s.reportEnd = nil
			s.reportsOverdue()
		case <-s.kill:
			s.kill = nil
			signalAll(procs, syscall.SIGKILL)
		}
	}
	// An abort a rank sent just before it exited may still be on its way
	// from the rank's socket: once the connections have ended, it is in
	// aborts (without this, TestAnAbortIsReportedWhenItsRankExitsRightAfterIt
	// lost the report in 2 of its first 3 runs of 20 jobs).
	srv.Settle(settleWait)
	for {
		select {
		case a := <-aborts:
			s.res.blame(a, procs[a.Rank].cmd.Process.Pid)
		default:
			return s.res
		}
	}
}

// settleWait bounds how long a job that has ended waits for its ranks'
// connections to the launcher to end: at once when the ranks are gone,
// longer only if a rank left a child holding its socket.
const settleWait = 500 * time.Millisecond

// supervisor is supervise's state: the job's result so far, whether the
// job is being stopped, and the state reports it waits for.
type supervisor struct {
	cfg    Config
	report io.Writer
	srv    *Server
	procs  []*rankProc
	res    Result

	stopping bool
	kill     <-chan time.Time // armed when the job is being stopped

	// Reporting: the ranks asked for their state and not yet heard from,
	// until reportEnd; then the job stops for stopWhy.
	awaiting  map[int]bool
	reportEnd <-chan time.Time
	stopWhy   string
}

// stop stops the job (once): the bootstrap fails the ranks' fences, the
// ranks get SIGTERM now and SIGKILL after cfg.Grace.
func (s *supervisor) stop(why string) {
	if s.stopping {
		return
	}
	s.stopping = true
	s.srv.Fail(why)
	signalAll(s.procs, syscall.SIGTERM)
	s.kill = time.After(s.cfg.Grace)
}

// askReports asks the ranks that can for a report of their state before
// the job stops for why (what says it in the launcher's line); with none
// to ask, it stops the job at once.
func (s *supervisor) askReports(why, what string) {
	if s.stopping || s.awaiting != nil {
		return
	}
	s.awaiting, s.stopWhy = map[int]bool{}, why
	for _, p := range s.procs {
		if p.pid > 0 && p.ready.Load() && s.cfg.ReportWait > 0 {
			s.awaiting[p.rank] = true
			syscall.Kill(p.pid, boot.ReportSignal) // the rank, not its plugins
		}
	}
	if len(s.awaiting) == 0 {
		s.stop(why)
		return
	}
	fmt.Fprintf(s.report, "gobtl run: %s; asking the ranks where they are\n", what)
	s.reportEnd = time.After(s.cfg.ReportWait)
}

// heard notes that rank reported (or ended); the job stops when every
// rank asked has.
func (s *supervisor) heard(rank int) {
	if s.awaiting == nil || s.stopping {
		return
	}
	delete(s.awaiting, rank)
	if len(s.awaiting) == 0 {
		s.stop(s.stopWhy)
	}
}

// exited records a rank's end; the first failure stops the job.
func (s *supervisor) exited(e Exit) {
	s.procs[e.Rank].pid = 0 // reaped: never signal a reused pid
	e = ended(s.srv, e)
	s.res.Exits[e.Rank] = e
	if e.failed() && s.res.First == nil && s.res.Reason == "" {
		ee := e
		s.res.First = &ee
		s.res.Status = e.Status()
		s.stop(e.String())
	}
	s.heard(e.Rank)
}

// interrupted handles the cancel of supervise's context: the job's state
// is asked for, then the job stops; an interrupt while the reports are
// awaited stops it at once.
func (s *supervisor) interrupted() {
	if s.res.First == nil && s.res.Reason == "" {
		s.res.Reason = "interrupted; stopping the job"
		s.res.Status = StatusInterrupted
	}
	if s.awaiting != nil { // a second interrupt does not wait
		s.stop(s.stopWhy)
	}
	s.askReports("the job was interrupted", "interrupted")
}

// timedOut handles the end of cfg.Timeout: the job's state is asked for,
// then the job stops.
func (s *supervisor) timedOut() {
	if s.res.First == nil && s.res.Reason == "" {
		s.res.Reason = fmt.Sprintf("timed out after %v; stopping the job", s.cfg.Timeout)
		s.res.Status = StatusTimeout
	}
	s.askReports("the job timed out", fmt.Sprintf("timed out after %v", s.cfg.Timeout))
}

// reportsOverdue stops the job when the ranks asked for their state did
// not all report within cfg.ReportWait, naming those that did not.
func (s *supervisor) reportsOverdue() {
	if s.stopping {
		return
	}
	var silent []int
	for r := range s.awaiting {
		silent = append(silent, r)
	}
	slices.Sort(silent)
	fmt.Fprintf(s.report, "gobtl run: no state report from rank %s within %v\n", joinInts(silent), s.cfg.ReportWait)
	s.stop(s.stopWhy)
}

// ended completes a rank's exit with what the bootstrap knows of it: a
// rank that joined the job and exited without finalizing failed, even
// with status 0, and its peers are told at once (Server.Lost) — they may
// be waiting on it, and their transports notice a dead peer late (when
// they next talk to it) or never (a peer they never connected to).
func ended(srv *Server, e Exit) Exit {
	joined, finalized := srv.Ended(e.Rank)
	if !joined || finalized {
		return e
	}
	if e.Code == 0 && e.Signal == 0 && e.Err == nil && e.Abort == "" {
		e.Unfinalized = true
	}
	srv.Lost(e.Rank, e.String())
	return e
}

// blame makes a rank's abort report the job's first failure, if nothing
// failed before it but the same rank's exit: the report explains that
// exit, which can be reaped before the report is read from the rank's
// socket. It says whether it did.
func (res *Result) blame(a Abort, pid int) bool {
	explains := res.First != nil && res.First.Rank == a.Rank && res.First.Abort == ""
	if !explains && (res.First != nil || res.Reason != "") {
		return false
	}
	res.First = &Exit{Rank: a.Rank, Pid: pid, Abort: a.Msg}
	res.Status = res.First.Status()
	return true
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// stackFile is the stack file's absolute path, checked to exist ("" for
// none).
func stackFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		return "", fmt.Errorf("launch: stack file: %w", err)
	}
	return abs, nil
}

// start starts rank rank, bound to masks[rank] (masks nil: unbound).
func start(prog string, cfg Config, rank int, env []string, masks []topo.CPUs, stdout, stderr *lockedWriter, fwd *sync.WaitGroup, reports chan<- int) (*rankProc, error) {
	cmd := exec.Command(prog, cfg.Args...)
	cmd.Env = append(env, boot.EnvReport+"=3")
	p := &rankProc{rank: rank, cmd: cmd}
	lr, lw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launch: rank %d: %w", rank, err)
	}
	cmd.ExtraFiles = []*os.File{lw} // fd 3 in the rank
	go readReports(lr, p, reports)
	// Each rank leads its own process group: a terminal's Ctrl-C reaches
	// only the launcher, which stops the ranks in order; and the ranks die
	// with the launcher even if it is killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if rank == 0 && cfg.Stdin != nil {
		cmd.Stdin = cfg.Stdin
	}
	closeAfter := []*os.File{lw}
	for _, out := range []struct {
		dst  *lockedWriter
		slot *io.Writer
	}{{stdout, &cmd.Stdout}, {stderr, &cmd.Stderr}} {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("launch: rank %d: %w", rank, err)
		}
		*out.slot = w
		closeAfter = append(closeAfter, w)
		fwd.Add(1)
		go func() {
			defer fwd.Done()
			defer r.Close()
			forward(r, out.dst, rank, cfg.TagOutput)
		}()
	}
	var mask topo.CPUs
	if masks != nil {
		mask = masks[rank]
	}
	err = startOn(cmd, mask)
	for _, f := range closeAfter {
		f.Close() // the child holds its own copies
	}
	if err != nil {
		return nil, fmt.Errorf("launch: rank %d: %w", rank, err)
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

// readReports reads a rank's report line (boot.EnvReport) until the rank
// and whatever inherited it are gone.
func readReports(r *os.File, p *rankProc, reports chan<- int) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		switch sc.Text() {
		case boot.ReportReady:
			p.ready.Store(true)
		case boot.ReportDone:
			select {
			case reports <- p.rank:
			default: // nobody asked: a report the rank made on its own
			}
		}
	}
}

func wait(p *rankProc) Exit {
	e := Exit{Rank: p.rank, Pid: p.cmd.Process.Pid}
	err := p.cmd.Wait()
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		e.Code, e.Signal = -1, ws.Signal()
	case ok:
		e.Code = ws.ExitStatus()
	case err != nil:
		e.Err = err
	}
	return e
}

// signalAll signals the process group of every rank that has not been
// reaped.
func signalAll(procs []*rankProc, sig syscall.Signal) {
	for _, p := range procs {
		if p.pid > 0 {
			syscall.Kill(-p.pid, sig)
		}
	}
}

// removeShm deletes the job's shared-memory files.
func removeShm(dir, job string) {
	matches, _ := filepath.Glob(filepath.Join(dir, boot.ShmPrefix(job)+"*"))
	for _, m := range matches {
		os.Remove(m)
	}
}

// lockedWriter serializes the ranks' writes to one stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// forward copies a rank's output. Tagged output goes line by line with the
// rank in front; untagged output goes as it comes, so that progress bars
// that redraw a line still work.
func forward(r io.Reader, dst *lockedWriter, rank int, tag bool) {
	buf := make([]byte, 32<<10)
	if !tag {
		io.CopyBuffer(dst, r, buf)
		return
	}
	prefix := "[" + strconv.Itoa(rank) + "] "
	var partial []byte
	var out strings.Builder
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		out.Reset()
		for len(data) > 0 {
			i := strings.IndexByte(string(data), '\n')
			if i < 0 {
				partial = append(partial, data...)
				break
			}
			out.WriteString(prefix)
			out.Write(partial)
			out.Write(data[:i+1])
			partial = partial[:0]
			data = data[i+1:]
		}
		if err != nil && len(partial) > 0 {
			out.WriteString(prefix)
			out.Write(partial)
			out.WriteByte('\n')
		}
		if out.Len() > 0 {
			dst.Write([]byte(out.String()))
		}
		if err != nil {
			return
		}
	}
}
