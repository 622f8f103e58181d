package launch

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/gobtl/gobtl/boot"
	"github.com/gobtl/gobtl/core"
)

// Abort is a rank's report of a fatal error through the bootstrap.
type Abort struct {
	Rank int
	Msg  string
}

// Server serves the bootstrap protocol of package boot for one job: it
// checks each rank's hello, gathers puts until every rank has fenced, then
// answers every rank with the round's puts of all ranks.
type Server struct {
	size int
	job  string
	ln   net.Listener

	// pending holds the connections that have not said hello yet (core's
	// limits on unauthenticated connections: only this user can reach the
	// socket, but a runaway process of theirs must not take the
	// launcher's descriptors).
	pending core.Pending

	aborts chan Abort
	// settled has a token after a rank's connection ends (Settle).
	settled chan struct{}

	// helloTimeout bounds the silence of a new connection before hello;
	// allHello runs once, when every rank has said hello.
	helloTimeout time.Duration
	allHello     func()
	hellos       int

	mu      sync.Mutex
	conns   map[int]*serverConn // by rank, after hello
	round   map[int]map[string][]byte
	waiting []*serverConn // ranks inside the current fence
	left    map[int]bool  // ranks whose session ended
	// joined and finalized record, by rank, a hello and a finalize
	// (boot.OpFinalize): a rank that joined and exits without finalizing
	// failed, whatever its exit status.
	joined, finalized []bool
	// lost holds the notices sent (Lost), by rank, for the ranks that
	// say hello after them.
	lost   map[int]*Reply
	failed string // set by Fail: every fence fails with it
	closed bool
	wg     sync.WaitGroup
}

type serverConn struct {
	conn net.Conn
	rank int
	wmu  sync.Mutex
	enc  *json.Encoder
}

// send writes rep to the rank. A rank that does not read its socket must
// not stall the launcher: past the write deadline its session is closed.
// A rank that is gone (the write finds its end closed) is left to the
// reader, which takes what the rank sent before it went (an abort report
// just before its exit) and then its end of file; closing here would
// throw those lines away.
func (c *serverConn) send(rep *Reply) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	err := c.enc.Encode(rep)
	if err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		c.conn.Close()
	}
}

// Reply is the wire reply (boot.Reply).
type Reply = boot.Reply

// HelloTimeout is how long the server waits for a new connection's hello
// before it closes it. A rank sends hello right after it connects.
const HelloTimeout = 10 * time.Second

// NewServer listens on the unix socket path for the ranks of a job.
func NewServer(path string, size int, job string) (*Server, error) {
	return newServer(path, size, job, HelloTimeout, nil)
}

// newServer is NewServer with the hello timeout and a function to run
// once every rank has said hello.
func newServer(path string, size int, job string, helloTimeout time.Duration, allHello func()) (*Server, error) {
	addr, err := net.ResolveUnixAddr("unix", path)
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap socket: %w", err)
	}
	s := &Server{
		size: size, job: job, ln: wrapListener(ln),
		aborts:       make(chan Abort, size),
		settled:      make(chan struct{}, 1),
		helloTimeout: helloTimeout,
		allHello:     allHello,
		conns:        map[int]*serverConn{},
		round:        map[int]map[string][]byte{},
		left:         map[int]bool{},
		joined:       make([]bool, size),
		finalized:    make([]bool, size),
		lost:         map[int]*Reply{},
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Aborts delivers the ranks' abort reports.
func (s *Server) Aborts() <-chan Abort { return s.aborts }

// Settle waits, up to d, until the connection of every rank that said
// hello has ended — all it sent read — and says whether they all had.
// The launcher calls it once every rank has exited: a report a rank sent
// just before it exited (an abort) is read after the rank is reaped as
// often as before.
func (s *Server) Settle(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		if open == 0 {
			return true
		}
		select {
		case <-s.settled:
		case <-t.C:
			return false
		}
	}
}

// Fail ends the exchange: the current fence and every later one fail with
// msg (a rank died, the job is stopping), so no rank waits on a fence that
// cannot complete.
func (s *Server) Fail(msg string) {
	s.mu.Lock()
	if s.failed == "" {
		s.failed = msg
	}
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, c := range waiting {
		c.send(&Reply{Op: boot.OpFence, Err: msg})
	}
}

// Close stops serving and closes every session.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*serverConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	err := s.ln.Close()
	for _, c := range conns {
		c.conn.Close()
	}
	s.wg.Wait()
	return err
}

// wrapListener lets the tests put a listener that fails in front of the
// server's.
var wrapListener = func(ln net.Listener) net.Listener { return ln }

// accept serves every connection until Close. An accept that fails (out
// of descriptors, say) is waited out, and the server serves on.
func (s *Server) accept() {
	defer s.wg.Done()
	var retry core.AcceptRetry
	for {
		conn, err := s.ln.Accept()
		s.mu.Lock()
		closed := s.closed
		if err == nil && !closed {
			s.wg.Add(1)
		}
		s.mu.Unlock()
		switch {
		case closed || errors.Is(err, net.ErrClosed):
			if conn != nil {
				conn.Close()
			}
			return
		case err != nil:
			time.Sleep(retry.Next())
			continue
		}
		retry.Reset()
		pc := s.pending.Admit(core.SystemClock.Now(), func() { conn.Close() })
		go s.serve(conn, pc)
	}
}

func (s *Server) serve(conn net.Conn, pc *core.PendingConn) {
	defer s.wg.Done()
	defer conn.Close()
	defer pc.Done()
	c := &serverConn{conn: conn, rank: -1, enc: json.NewEncoder(conn)}
	br := bufio.NewReaderSize(conn, 64<<10)
	// A rank says hello as soon as it connects; a connection that stays
	// silent is not one of ours and must not hold a goroutine and a
	// descriptor for the job's lifetime.
	conn.SetReadDeadline(time.Now().Add(s.helloTimeout))
	for {
		line, err := boot.ReadLine(br, boot.MaxLine)
		if errors.Is(err, boot.ErrLineTooLong) {
			c.send(&Reply{Op: "error", Err: fmt.Sprintf("request longer than %d bytes", boot.MaxLine)})
		}
		if err != nil {
			s.leave(c, err)
			return
		}
		req, err := boot.DecodeRequest(line)
		if err != nil {
			c.send(&Reply{Op: req.Op, Err: err.Error()})
			s.leave(c, err)
			return
		}
		if c.rank < 0 && req.Op != boot.OpHello {
			c.send(&Reply{Op: req.Op, Err: "the first request must be hello"})
			return
		}
		switch req.Op {
		case boot.OpHello:
			if err := s.hello(c, &req); err != nil {
				c.send(&Reply{Op: req.Op, Err: err.Error()})
				return
			}
			// A rank may compute for hours between fences.
			conn.SetReadDeadline(time.Time{})
			pc.Done()
			// Before the reply: the last rank's Dial returns to a tidied host.
			s.helloed()
			c.send(&Reply{Op: boot.OpHello, Size: s.size})
			for _, rep := range s.lostBefore(c.rank) {
				c.send(rep)
			}
		case boot.OpFence:
			s.fence(c, req.Puts)
		case boot.OpAbort:
			select {
			case s.aborts <- Abort{Rank: c.rank, Msg: req.Msg}:
			default: // one report per rank is plenty
			}
		case boot.OpFinalize:
			s.mu.Lock()
			s.finalized[c.rank] = true
			s.mu.Unlock()
			// After the record: the rank exits only once it has the reply.
			c.send(&Reply{Op: boot.OpFinalize})
		}
	}
}

// errWrongJob answers a hello for another job. It says no more: a process
// that guessed the socket learns neither this job's id nor its size.
var errWrongJob = errors.New("not this launcher's job")

func (s *Server) hello(c *serverConn, req *boot.Request) error {
	if subtle.ConstantTimeCompare([]byte(req.Job), []byte(s.job)) != 1 {
		return errWrongJob
	}
	if req.Rank < 0 || req.Rank >= s.size {
		return fmt.Errorf("rank %d is out of range [0,%d)", req.Rank, s.size)
	}
	if c.rank >= 0 {
		return errors.New("hello sent twice")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.conns[req.Rank]; dup {
		return fmt.Errorf("rank %d is already connected", req.Rank)
	}
	c.rank = req.Rank
	s.conns[req.Rank] = c
	s.joined[req.Rank] = true
	return nil
}

// Ended says whether rank said hello and whether it finalized since.
func (s *Server) Ended(rank int) (joined, finalized bool) {
	if rank < 0 || rank >= s.size {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.joined[rank], s.finalized[rank]
}

// Lost tells every other rank in session that rank ended without
// finalizing, how in msg (boot.OpLost), so that their operations on it
// fail at once. It does not wait for the notices to be written.
func (s *Server) Lost(rank int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	rep := &Reply{Op: boot.OpLost, Rank: rank, Err: msg}
	s.lost[rank] = rep
	for r, c := range s.conns {
		if r == rank {
			continue
		}
		// A goroutine each: a rank that does not read (stopped) holds
		// its own notice up to send's deadline, not the others'.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.send(rep)
		}()
	}
}

// lostBefore is the notices of ranks lost before rank's hello was
// answered, for that rank. Its own is not among them: a rank that exits
// right after its hello can be reaped, and lost, before its session gets
// here.
func (s *Server) lostBefore(rank int) []*Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost []*Reply
	for r, rep := range s.lost {
		if r != rank {
			lost = append(lost, rep)
		}
	}
	return lost
}

// helloed counts a completed hello and runs allHello after the last.
func (s *Server) helloed() {
	s.mu.Lock()
	s.hellos++
	last := s.hellos == s.size
	s.mu.Unlock()
	if last && s.allHello != nil {
		s.allHello()
	}
}

func (s *Server) fence(c *serverConn, puts map[string][]byte) {
	s.mu.Lock()
	if s.failed != "" {
		msg := s.failed
		s.mu.Unlock()
		c.send(&Reply{Op: boot.OpFence, Err: msg})
		return
	}
	for r := range s.left {
		msg := fmt.Sprintf("rank %d left the bootstrap and cannot fence", r)
		s.mu.Unlock()
		c.send(&Reply{Op: boot.OpFence, Err: msg})
		return
	}
	if _, again := s.round[c.rank]; again {
		s.mu.Unlock()
		c.send(&Reply{Op: boot.OpFence, Err: "fence entered twice"})
		return
	}
	if puts == nil {
		puts = map[string][]byte{}
	}
	s.round[c.rank] = puts
	s.waiting = append(s.waiting, c)
	if len(s.round) < s.size {
		s.mu.Unlock()
		return
	}
	rep := &Reply{Op: boot.OpFence, KV: s.round}
	waiting := s.waiting
	s.round = map[int]map[string][]byte{}
	s.waiting = nil
	s.mu.Unlock()
	for _, w := range waiting {
		w.send(rep)
	}
}

// leave records that a session ended; fences it was needed for fail.
func (s *Server) leave(c *serverConn, err error) {
	if c.rank < 0 {
		return
	}
	s.mu.Lock()
	s.left[c.rank] = true
	delete(s.conns, c.rank)
	waiting := s.waiting
	if len(waiting) > 0 {
		s.waiting = nil
		s.round = map[int]map[string][]byte{}
	}
	s.mu.Unlock()
	select {
	case s.settled <- struct{}{}:
	default:
	}
	msg := fmt.Sprintf("rank %d left the bootstrap during a fence", c.rank)
	for _, w := range waiting {
		if w != c {
			w.send(&Reply{Op: boot.OpFence, Err: msg})
		}
	}
}
