package coll

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gobtl/gobtl/pml"
)

// A collective is built as a schedule, libnbc's idea: a list of steps —
// send a buffer to a rank, receive one from a rank, combine two buffers,
// copy one into another — cut into rounds by wait marks. Steps run in
// order: a send or receive is posted and the schedule moves on, a local
// step runs at once, and a wait mark holds the schedule until every
// message posted since the last one has completed. The algorithms are
// thus written as straight-line code (post, post, wait, combine, ...),
// and one executor, Advance, serves the blocking call (which waits on it)
// and the non-blocking one (whose Request the PML advances with every
// wait and test of the job).
//
// Every message of one collective carries the collective's tag on the
// communicator's collective context, so collectives never match
// point-to-point messages, nor one another. Within a collective, the
// messages between two ranks are matched in the order they are posted —
// the PML's non-overtaking rule — so an algorithm posts its receives from
// a rank in the order that rank sends to it.
//
// A receive may also be posted ahead of its round (prepost) and joined to
// a later one (await): posted before the rank's first send, it is matched
// the moment its message arrives rather than parked as unexpected and
// matched again when the round comes. The wait marks in between do not
// wait for it.

type stepKind uint8

const (
	stepSend     stepKind = iota + 1
	stepRecv              // into a, expecting exactly len(a) bytes
	stepReduce            // a = a ∘ b
	stepCopy              // a = b
	stepWait              // hold until every message of the round completes
	stepPrepost           // post a receive into a now, held as early[idx]
	stepAwait             // make early[idx] a message of the round
	stepExchange          // stepSend to a peer that sends to this rank in the same round
)

type step struct {
	kind stepKind
	peer int
	idx  int // stepPrepost, stepAwait: the receive's place in early
	a, b []byte
}

// schedule is one collective in progress: its steps, where it is, and the
// messages of the current round. A Comm keeps the finished ones for the
// next collective, so that a collective in steady state allocates nothing.
type schedule struct {
	c      *Comm
	tag    int
	op     Op
	steps  []step
	pc     int // next step
	reqs   []*pml.Request
	want   []int // per request: the bytes a receive must bring, -1 for a send
	sts    []pml.Status
	early  []early // receives posted ahead of their round, by prepost's handle
	nearly int     // preposts so far, while the schedule is built
	mem    []byte  // scratch the algorithm carves with tmp
	off    int
	ints   []int // scratch for block offsets while the schedule is built
	ioff   int
	kind   Kind
	alg    Alg
	// warm: the steps may serve the next call between the buffers wa
	// and wb (Comm.again).
	warm   bool
	wa, wb []byte
	// idle counts the advances that found the round unfinished, for the
	// question whether it ever will (agree.go); noticed says another
	// rank's notice failed it. sig is the signature in its tag (shifted
	// into place), which again reuses (agree.go).
	idle    int
	noticed bool
	sig     int
}

// early is a receive posted ahead of its round and the bytes it must
// bring.
type early struct {
	r    *pml.Request
	want int
}

// reset readies s for a new collective.
func (s *schedule) reset(c *Comm, tag int, k Kind, alg Alg) {
	// put cleared the steps of a schedule from the free list.
	s.c, s.tag, s.kind, s.alg = c, tag, k, alg
	s.op = Op{}
	s.idle, s.noticed = 0, false
	s.steps, s.pc, s.off, s.ioff, s.nearly = s.steps[:0], 0, 0, 0, 0
}

func (s *schedule) send(peer int, buf []byte) {
	s.steps = append(s.steps, step{kind: stepSend, peer: peer, a: buf})
}

// exchange is send to a peer that sends to this rank in the same round
// and waits for this rank's message as this rank waits for its: the PML
// may move it otherwise than a one-way message (pml.Comm.IsendExchange —
// shared memory with more ranks than cores copies it through its
// fragments, which needs both processes running, as they are here).
func (s *schedule) exchange(peer int, buf []byte) {
	s.steps = append(s.steps, step{kind: stepExchange, peer: peer, a: buf})
}

func (s *schedule) recv(peer int, buf []byte) {
	s.steps = append(s.steps, step{kind: stepRecv, peer: peer, a: buf})
}

// prepost posts a receive from peer into buf at once, ahead of its round,
// and returns its handle for await, which makes it part of a later round.
// Every receive from peer posted before it must be too (the PML matches a
// peer's messages in the order the receives are posted).
func (s *schedule) prepost(peer int, buf []byte) int {
	i := s.nearly
	s.nearly++
	s.steps = append(s.steps, step{kind: stepPrepost, peer: peer, idx: i, a: buf})
	return i
}

// await joins the preposted receive i to the current round.
func (s *schedule) await(i int) {
	s.steps = append(s.steps, step{kind: stepAwait, idx: i})
}

// reduce combines in into inout with the collective's operation: inout =
// inout ∘ in, element by element, inout holding the lower ranks' part
// when the operation does not commute.
func (s *schedule) reduce(inout, in []byte) {
	if len(inout) > 0 {
		s.steps = append(s.steps, step{kind: stepReduce, a: inout, b: in})
	}
}

// copy copies src into dst (they may overlap).
func (s *schedule) copy(dst, src []byte) {
	if len(dst) > 0 && !same(dst, src) {
		s.steps = append(s.steps, step{kind: stepCopy, a: dst, b: src})
	}
}

// wait ends a round.
func (s *schedule) wait() {
	if n := len(s.steps); n > 0 && s.steps[n-1].kind != stepWait {
		s.steps = append(s.steps, step{kind: stepWait})
	}
}

// tmp returns n bytes of scratch, 8-byte aligned so that any element type
// may be viewed in it, valid until the collective ends. A collective that
// needs more than the schedule has grows it once; the bytes handed out
// before stay with the steps that use them.
func (s *schedule) tmp(n int) []byte {
	n8 := (n + 7) &^ 7
	if s.off+n8 > len(s.mem) {
		s.mem = make([]byte, max(2*len(s.mem), n8, 256))
		s.off = 0
	}
	b := s.mem[s.off : s.off+n : s.off+n]
	s.off += n8
	return b
}

// tmpInts returns n ints of scratch, valid while the schedule is built.
func (s *schedule) tmpInts(n int) []int {
	if s.ioff+n > len(s.ints) {
		s.ints = make([]int, max(2*len(s.ints), n, 64))
		s.ioff = 0
	}
	b := s.ints[s.ioff : s.ioff+n : s.ioff+n]
	s.ioff += n
	return b
}

// Advance runs the schedule as far as it can without blocking; it is the
// schedule's pml.Op. A round whose messages are done is followed at once
// by the next, so a collective whose messages have all arrived finishes
// in one call. The PML calls it beside a poll of its own, so it only
// looks at its messages (pml.Comm.Finished).
func (s *schedule) Advance() (bool, error) { return s.advance(false) }

// advance is Advance; poll makes it poll the PML for every round it
// tests, as the first advance of a collective does (start, nonblocking):
// the messages of the ranks that came first are then taken in and the
// collective may be over before it needs a request.
func (s *schedule) advance(poll bool) (bool, error) {
	x := s.c.x
	for {
		if len(s.reqs) > 0 {
			var done bool
			var err error
			if poll {
				done, err = x.Testall(s.reqs, s.sts[:len(s.reqs)])
			} else {
				done, err = x.Finished(s.reqs, s.sts[:len(s.reqs)])
			}
			if !done {
				// A member lost elsewhere may mean a message this round
				// waits for will never come; so may a rank that called
				// the collective with other arguments (agree.go).
				if err = x.Lost(); err == nil {
					if s.idle++; s.idle%pml.StuckEvery != 0 {
						return false, nil
					}
					if err = s.c.stuck(s); err == nil {
						return false, nil
					}
				}
			}
			if err == nil {
				err = s.checkCounts()
			}
			if err != nil {
				return true, s.fail(err)
			}
			s.reqs, s.want, s.idle = s.reqs[:0], s.want[:0], 0
		}
		if s.pc == len(s.steps) {
			s.c.put(s)
			return true, nil
		}
		if err := s.run(); err != nil {
			return true, s.fail(err)
		}
	}
}

// run executes steps up to and including the next wait mark.
func (s *schedule) run() error {
	x := s.c.x
	for s.pc < len(s.steps) {
		st := &s.steps[s.pc]
		s.pc++
		switch st.kind {
		case stepWait:
			return nil
		case stepSend, stepExchange, stepRecv:
			var r *pml.Request
			var err error
			want := -1
			switch st.kind {
			case stepSend:
				// A message that leaves at once needs no request.
				var sent bool
				if sent, err = x.TrySend(st.a, st.peer, s.tag); sent {
					if err != nil {
						return err
					}
					continue
				}
				r, err = x.Isend(st.a, st.peer, s.tag)
			case stepExchange:
				r, err = x.IsendExchange(st.a, st.peer, s.tag)
			default:
				r, err = x.Irecv(st.a, st.peer, s.tag)
				want = len(st.a)
			}
			if err != nil {
				return err
			}
			s.join(r, want)
		case stepPrepost:
			r, err := x.Irecv(st.a, st.peer, s.tag)
			if err != nil {
				return err
			}
			for len(s.early) <= st.idx {
				s.early = append(s.early, early{})
			}
			s.early[st.idx] = early{r, len(st.a)}
		case stepAwait:
			e := s.early[st.idx]
			s.early[st.idx] = early{}
			s.join(e.r, e.want)
		case stepReduce:
			s.op.Fn.Combine(st.a, st.b)
		case stepCopy:
			copy(st.a, st.b)
		}
	}
	return nil
}

// join makes r a message of the current round; want is the bytes a
// receive must bring, -1 for a send.
func (s *schedule) join(r *pml.Request, want int) {
	s.reqs = append(s.reqs, r)
	s.want = append(s.want, want)
	if len(s.sts) < len(s.reqs) {
		s.sts = append(s.sts, pml.Status{})
	}
}

// checkCounts fails a round in which a rank sent fewer bytes than this
// rank's arguments say it must: the ranks called the collective with
// different sizes. (More bytes fail the receive as truncated, which fail
// makes ErrMismatch too.)
func (s *schedule) checkCounts() error {
	for i, want := range s.want {
		if want >= 0 && s.sts[i].Count != want {
			return fmt.Errorf("coll: %s %s: rank %d sent %d bytes where this rank's arguments make %d: %w",
				s.kind, s.alg, s.sts[i].Source, s.sts[i].Count, want, ErrMismatch)
		}
	}
	return nil
}

// fail abandons the schedule: receives still posted are cancelled, and
// every request of the round is freed, to be recycled when it completes
// (a send to a rank that gave up may never). The schedule is not reused:
// its buffers may still be in the PML's hands.
func (s *schedule) fail(err error) error {
	err = mismatch(err)
	x := s.c.x
	for _, r := range s.reqs {
		if r != nil {
			_ = x.Cancel(r) // a send cannot be, and need not be
			_ = x.Free(r)
		}
	}
	for _, e := range s.early {
		if e.r != nil {
			_ = x.Cancel(e.r)
			_ = x.Free(e.r)
		}
	}
	s.reqs, s.early = nil, nil
	s.c.mismatched(s, err)
	return fmt.Errorf("coll: %s %s: %w", s.kind, s.alg, err)
}

// sameRef reports whether a and b are the same slice: the same bytes,
// or both nil.
func sameRef(a, b []byte) bool {
	return len(a) == len(b) && cap(a) == cap(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// same reports whether a and b are the same bytes.
func same(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// overlap reports whether a and b share any byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := addr(a), addr(b)
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// ErrMismatch reports ranks that called a collective with arguments that
// do not fit together: different lengths, or a root they disagree on.
var ErrMismatch = errors.New("collective arguments differ between ranks")

// String names the collective and its algorithm, for the state a stuck
// rank reports (pml.State). Only what is set before Start: the PML calls
// it under its lock while another goroutine may be advancing s.
func (s *schedule) String() string { return fmt.Sprintf("%v (%v)", s.kind, s.alg) }
