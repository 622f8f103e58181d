package patterns_test

import (
	"context"
	"errors"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/bench"
	"github.com/gobtl/gobtl/bench/patterns"
	"github.com/gobtl/gobtl/pml"
)

// runAll runs the pattern on n goroutine ranks (the in-process fabric, or
// the stack opts names) and returns every rank's stats. wrap, if set,
// stands between the pattern and one rank's communicator.
func runAll(t *testing.T, n int, name string, o patterns.Options, opts gobtl.Options, wrap func(c *gobtl.Comm) bench.Comm) ([]*patterns.Stats, error) {
	t.Helper()
	stats := make([]*patterns.Stats, n)
	var mu sync.Mutex
	err := gobtl.RunLocal(context.Background(), n, opts, func(c *gobtl.Comm) error {
		var pc bench.Comm = c
		if wrap != nil {
			pc = wrap(c)
		}
		st, err := patterns.Run(pc, name, o)
		if err != nil {
			return err
		}
		mu.Lock()
		stats[c.Rank()] = st
		mu.Unlock()
		return nil
	})
	return stats, err
}

// small is a run that keeps every message count and shrinks the data.
var small = patterns.Options{Iters: 2, Scale: 0.01, Compute: -1}

// parent is rank s's parent in a binomial reduce to rank 0.
func parent(s int) int { return s &^ (s & -s) }

// The message counts the package doc promises at 8 ranks: want(s, d, T)
// is how many messages rank s sends rank d in a run of T iterations.
var eightRankCounts = map[string]struct {
	want  func(s, d, T int) int
	total func(T int) int
}{
	"is": {func(s, d, T int) int {
		if s == d {
			return 0
		}
		return 2*T + T*b(bits.OnesCount(uint(s^d)) == 1) + b(d == s+1) + b(s > 0 && d == parent(s))
	}, func(T int) int { return 136*T + 14 }},
	"ft": {func(s, d, T int) int {
		if s == d {
			return 0
		}
		return T + 2 + T*b(s > 0 && d == parent(s))
	}, func(T int) int { return 56*(T+2) + 7*T }},
	"lu": {func(s, d, T int) int {
		// 4×2 grid, rank = row + 4·col.
		rs, cs, rd, cd := s%4, s/4, d%4, d/4
		n := 0
		if cs == cd && (rs-rd == 1 || rd-rs == 1) || rs == rd && cs != cd {
			n = 63*T + 2
		}
		if bits.OnesCount(uint(s^d)) == 1 {
			n += 2
		}
		return n
	}, func(T int) int { return 1260*T + 88 }},
	"cg": {func(s, d, T int) int {
		// 2×4 grid, rank = row·4 + col; row partners: col⊕2, col⊕1;
		// transpose partners 2↔4, 3↔5, the others themselves.
		exch := []int{0, 1, 4, 5, 2, 3, 6, 7}
		n := 0
		if s/4 == d/4 && (s%4^d%4 == 1 || s%4^d%4 == 2) {
			n += 79 * T
		}
		if exch[s] == d {
			n += 26 * T
		}
		return n
	}, func(T int) int { return 1472 * T }},
	"mg": {func(s, d, T int) int {
		if bits.OnesCount(uint(s^d)) == 1 { // the axis neighbours of a 2×2×2 grid
			return 46*T + 8
		}
		return 0
	}, func(T int) int { return 1104*T + 192 }},
	"bt": {multiPartition8, func(T int) int { return 160*T + 14 }},
	"sp": {multiPartition8, func(T int) int { return 160*T + 14 }},
}

// multiPartition8: rank = a·2 + b, a ∈ Z4, b ∈ Z2; the partners are
// (a∓1, b∓1) in x, (a±1, b) in y and (a, b+1) in z, 4 messages a step
// each; and two binomial reduces to rank 0.
func multiPartition8(s, d, T int) int {
	a, bb := s/2, s%2
	rank := func(a, b int) int { return (a+4)%4*2 + (b+2)%2 }
	n := 0
	for _, p := range []int{rank(a-1, bb-1), rank(a+1, bb+1), rank(a+1, bb), rank(a-1, bb), rank(a, bb+1)} {
		if p == d {
			n += 4 * T
		}
	}
	return n + 2*b(s > 0 && d == parent(s))
}

func b(c bool) int {
	if c {
		return 1
	}
	return 0
}

func TestEveryPatternSendsTheDocumentedMessagesOnEightRanks(t *testing.T) {
	for _, name := range patterns.Names() {
		t.Run(name, func(t *testing.T) {
			want, ok := eightRankCounts[name]
			if !ok {
				t.Fatalf("no counts written down for %s", name)
			}
			stats, err := runAll(t, 8, name, small, gobtl.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			T := small.Iters
			total := 0
			for s, st := range stats {
				if st.Iters != T || st.Scale != small.Scale || st.Rank != s || st.Size != 8 {
					t.Errorf("rank %d reports iters %d, scale %v, rank %d of %d", s, st.Iters, st.Scale, st.Rank, st.Size)
				}
				for d := range 8 {
					if got, w := st.Msgs[d], want.want(s, d, T); got != int64(w) {
						t.Errorf("rank %d sent rank %d %d messages, want %d", s, d, got, w)
					}
					if got, w := stats[d].Recvs[s], st.Msgs[d]; got != w {
						t.Errorf("rank %d received %d of the %d messages rank %d sent it", d, got, w, s)
					}
					if st.Msgs[d] > 0 && st.Bytes[d] < patterns.MinSize*st.Msgs[d] {
						t.Errorf("rank %d sent rank %d %d bytes in %d messages", s, d, st.Bytes[d], st.Msgs[d])
					}
				}
				total += int(st.TotalMsgs())
			}
			if w := want.total(T); total != w {
				t.Errorf("%d messages in all, want %d", total, w)
			}
		})
	}
}

func TestLUSizesItsMessagesAsNPBAtEightRanks(t *testing.T) {
	stats, err := runAll(t, 8, "lu", patterns.Options{Iters: 1, Scale: 1, Compute: -1}, gobtl.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1 is row 1, column 0 of the 4×2 grid: 16×32 columns; without a
	// west neighbour jst = 2, so its sweep faces have 31 points toward
	// north and south and 16 toward the east. With T = 1: 62 sweep
	// messages and 3 exchange_3 faces (2 in setup) to each neighbour, and
	// the allreduces (40 B, 2 of them) to 1⊕1 = 0 and 1⊕4 = 5.
	south := 62*5*8*31 + 3*2*5*8*64*32
	east := 62*5*8*16 + 3*2*5*8*64*16 + 2*40
	north := south + 2*40
	st := stats[1]
	for d, want := range map[int]int{0: north, 2: south, 5: east, 3: 2 * 40} {
		if st.Bytes[d] != int64(want) {
			t.Errorf("rank 1 sent rank %d %d bytes, want %d", d, st.Bytes[d], want)
		}
	}
}

func TestBTAndSPSizeTheirMessagesAsNPBAtEightRanks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fwd, back int // doubles per face point of the line solves
	}{{"bt", 30, 5}, {"sp", 22, 10}} {
		t.Run(tc.name, func(t *testing.T) {
			stats, err := runAll(t, 8, tc.name, patterns.Options{Iters: 1, Scale: 1, Compute: -1}, gobtl.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// 4×4×2 cells of 16×16×32 points; rank 0 owns (i, i, i mod 2).
			// In x and y it has 3 cells with a neighbour on either side
			// (faces of 16·32 points), one a slab: a copy_faces message of
			// 5 doubles both ways over the 3 faces, then 3 forward solve
			// messages to the +1 side and 3 back to the −1 side, each of
			// one face. In z its partner on both sides is rank 1: two
			// faces of 16·16 points in each of the 2 slabs.
			const face, zface = 16 * 32, 16 * 16
			copyFaces := 2 * 5 * 8 * 3 * face
			fwd, back := 3*8*tc.fwd*face, 3*8*tc.back*face
			z := 2*2*5*8*2*zface + 8*(tc.fwd+tc.back)*2*zface
			// x: −1 is rank 3 (a+1, b+1), +1 rank 7; y: −1 is rank 6, +1 rank 2.
			for d, want := range map[int]int{3: copyFaces + back, 7: copyFaces + fwd, 6: copyFaces + back, 2: copyFaces + fwd, 1: z, 4: 0, 5: 0} {
				if got := stats[0].Bytes[d]; got != int64(want) {
					t.Errorf("rank 0 sent rank %d %d bytes, want %d", d, got, want)
				}
			}
		})
	}
}

func TestPatternsRunOnOtherRankCounts(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 6} {
		for _, name := range patterns.Names() {
			stats, err := runAll(t, n, name, small, gobtl.Options{}, nil)
			if name == "cg" && n&(n-1) != 0 {
				if err == nil || !strings.Contains(err.Error(), "power-of-two") {
					t.Errorf("cg on %d ranks: %v, want a clear refusal", n, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s on %d ranks: %v", name, n, err)
				continue
			}
			for s, st := range stats {
				for d := range n {
					if stats[d].Recvs[s] != st.Msgs[d] {
						t.Errorf("%s on %d ranks: rank %d sent rank %d %d messages, %d arrived", name, n, s, d, st.Msgs[d], stats[d].Recvs[s])
					}
				}
			}
		}
	}
}

func TestBadOptionsAreRefused(t *testing.T) {
	for _, o := range []patterns.Options{{Iters: -1}, {Scale: -0.5}} {
		if _, err := runAll(t, 2, "lu", o, gobtl.Options{}, nil); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := runAll(t, 1, "nosuch", small, gobtl.Options{}, nil); err == nil || !strings.Contains(err.Error(), "lu") {
		t.Errorf("unknown pattern: %v, want the list of patterns", err)
	}
}

// tamper stands between a pattern and one rank's communicator and spoils
// that rank's k-th pattern message: flips a byte, sends it where no one
// receives (a loss), or sends it twice.
type tamper struct {
	*gobtl.Comm
	mode  string
	k, n  int
	extra []*pml.Request
}

func (t *tamper) Isend(buf []byte, dest, tag int) (*pml.Request, error) {
	if tag != patterns.Tag {
		return t.Comm.Isend(buf, dest, tag)
	}
	t.n++
	if t.n != t.k {
		return t.Comm.Isend(buf, dest, tag)
	}
	switch t.mode {
	case "corrupt":
		b := append([]byte(nil), buf...)
		b[len(b)-1] ^= 0x40 // in the body of any message over 8 bytes
		return t.Comm.Isend(b, dest, tag)
	case "lose":
		return t.Comm.Isend(buf, dest, tag+1)
	case "duplicate":
		r, err := t.Comm.Isend(buf, dest, tag)
		if err != nil {
			return nil, err
		}
		t.extra = append(t.extra, r)
		return t.Comm.Isend(buf, dest, tag)
	}
	panic("tamper: mode " + t.mode)
}

// stallStack is the in-process fabric with a stall timeout: RunLocal
// aborts the other ranks once the rank that got the spoiled message fails,
// and should that rank miss it and wait forever instead, the timeout turns
// a hung test into a failed one.
func stallStack(t *testing.T) gobtl.Options {
	p := filepath.Join(t.TempDir(), "stack.hcl")
	if err := os.WriteFile(p, []byte("job {\n  stall_timeout = \"10s\"\n}\nbtl \"inproc\" \"default\" {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return gobtl.Options{ConfigFiles: []string{p}}
}

func TestASpoiledMessageFailsTheRun(t *testing.T) {
	tests := []struct {
		pattern, mode string
		k             int // which of rank 2's messages
		want          error
	}{
		{"lu", "corrupt", 40, patterns.ErrCorrupt},
		{"lu", "lose", 40, patterns.ErrLost},
		{"lu", "duplicate", 40, patterns.ErrDuplicate},
		{"is", "lose", 5, patterns.ErrLost},
		{"ft", "corrupt", 3, patterns.ErrCorrupt},
		{"cg", "lose", 10, patterns.ErrLost},
		{"mg", "duplicate", 7, patterns.ErrDuplicate},
		{"sp", "corrupt", 20, patterns.ErrCorrupt},
		// Rank 2's last message (the last reduce of the verification, to
		// rank 0): only the end-of-run markers can tell.
		{"bt", "lose", 4*5*2 + 2, patterns.ErrLost},
		{"bt", "duplicate", 4*5*2 + 2, patterns.ErrDuplicate},
	}
	for _, tc := range tests {
		t.Run(tc.pattern+" "+tc.mode, func(t *testing.T) {
			var tp *tamper
			_, err := runAll(t, 8, tc.pattern, small, stallStack(t), func(c *gobtl.Comm) bench.Comm {
				if c.Rank() != 2 {
					return c
				}
				tp = &tamper{Comm: c, mode: tc.mode, k: tc.k}
				return tp
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tp.n < tc.k {
				t.Fatalf("rank 2 sent only %d messages, none spoiled", tp.n)
			}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				if errors.Is(e, tc.want) {
					t.Log(e)
				}
			}
		})
	}
}
