package gobtl

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/gobtl/gobtl/coll"
)

// The typed collectives that move data, and the non-blocking forms of
// every collective, against the serial reference: every element of every
// rank's result is the one the serial model puts there, for several job
// sizes, lengths and roots, blocking, waited for, and completed by Test
// polling alone.

// particle is plain data of several fields, with padding-free layout
// of 16 bytes.
type particle struct {
	X, Y float32
	ID   int64
}

// completion is how a test completes a non-blocking collective.
type completion int

const (
	blocking completion = iota // the blocking form
	waited                     // the non-blocking form and Wait
	tested                     // the non-blocking form and Test until done
)

func (m completion) String() string { return [...]string{"blocking", "waited", "tested"}[m] }

// complete runs a collective as m says.
func complete(c *Comm, m completion, block func() error, start func() (*Request, error)) error {
	if m == blocking {
		return block()
	}
	r, err := start()
	if err != nil {
		return err
	}
	if m == waited {
		_, err := c.Wait(r)
		return err
	}
	for {
		done, st, err := c.Test(r)
		if err != nil {
			return err
		}
		if done {
			return st.Err
		}
		runtime.Gosched()
	}
}

// block returns the k elements rank r contributes (to rank to, for
// alltoall; -1 otherwise).
func block[T any](mk func(r, i int) T, r, to, k int) []T {
	out := make([]T, k)
	for i := range out {
		out[i] = mk(r*1000+to+1, i)
	}
	return out
}

// vlayout is a v-collective's counts and displacements: rank i has
// (i%3)·k+1 elements, with a gap of one element before each block.
func vlayout(n, k int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for i := range n {
		counts[i] = (i%3)*k + 1
		displs[i] = total + 1
		total += counts[i] + 1
	}
	return counts, displs, total
}

// moves checks Bcast, Gather, Scatter, Allgather and Alltoall of T, each
// in every completion, and the v-forms, against the serial reference.
func moves[T comparable](c *Comm, mk func(r, i int) T) error {
	n, me := c.Size(), c.Rank()
	for _, k := range []int{0, 1, 5, 3000} {
		for _, root := range slices.Compact([]int{0, n / 2, n - 1}) {
			for _, m := range []completion{blocking, waited, tested} {
				what := fmt.Sprintf("%v of %d from root %d, %v", reflect.TypeFor[T](), k, root, m)
				if err := movesRooted(c, mk, k, root, m); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
			what := fmt.Sprintf("%v v-forms of %d, root %d", reflect.TypeFor[T](), k, root)
			if err := movesV(c, mk, k, root); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		for _, m := range []completion{blocking, waited, tested} {
			mine := block(mk, me, -1, k)
			all := make([]T, n*k)
			if err := complete(c, m, func() error { return Allgather(c, mine, all) },
				func() (*Request, error) { return Iallgather(c, mine, all) }); err != nil {
				return fmt.Errorf("allgather of %d, %v: %w", k, m, err)
			}
			for r := range n {
				if !slices.Equal(all[r*k:(r+1)*k], block(mk, r, -1, k)) {
					return fmt.Errorf("allgather of %d, %v: block %d wrong", k, m, r)
				}
			}
			send, recv := make([]T, 0, n*k), make([]T, n*k)
			for d := range n {
				send = append(send, block(mk, me, d, k)...)
			}
			if err := complete(c, m, func() error { return Alltoall(c, send, recv) },
				func() (*Request, error) { return Ialltoall(c, send, recv) }); err != nil {
				return fmt.Errorf("alltoall of %d, %v: %w", k, m, err)
			}
			for s := range n {
				if !slices.Equal(recv[s*k:(s+1)*k], block(mk, s, me, k)) {
					return fmt.Errorf("alltoall of %d, %v: block from %d wrong", k, m, s)
				}
			}
		}
	}
	return nil
}

// movesRooted checks Bcast, Gather and Scatter from root.
func movesRooted[T comparable](c *Comm, mk func(r, i int) T, k, root int, m completion) error {
	n, me := c.Size(), c.Rank()
	buf := make([]T, k)
	if me == root {
		copy(buf, block(mk, root, -1, k))
	}
	if err := complete(c, m, func() error { return Bcast(c, buf, root) },
		func() (*Request, error) { return Ibcast(c, buf, root) }); err != nil {
		return fmt.Errorf("bcast: %w", err)
	}
	if !slices.Equal(buf, block(mk, root, -1, k)) {
		return errors.New("bcast: wrong elements")
	}
	all := make([]T, n*k)
	mine := block(mk, me, -1, k)
	if err := complete(c, m, func() error { return Gather(c, mine, all, root) },
		func() (*Request, error) { return Igather(c, mine, all, root) }); err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	if me == root {
		for r := range n {
			if !slices.Equal(all[r*k:(r+1)*k], block(mk, r, -1, k)) {
				return fmt.Errorf("gather: block %d wrong", r)
			}
		}
	}
	var send []T
	if me == root {
		for r := range n {
			send = append(send, block(mk, root, r, k)...)
		}
	}
	recv := make([]T, k)
	if err := complete(c, m, func() error { return Scatter(c, send, recv, root) },
		func() (*Request, error) { return Iscatter(c, send, recv, root) }); err != nil {
		return fmt.Errorf("scatter: %w", err)
	}
	if !slices.Equal(recv, block(mk, root, me, k)) {
		return errors.New("scatter: wrong elements")
	}
	return nil
}

// movesV checks Gatherv, Scatterv, Allgatherv and Alltoallv with blocks of
// unequal lengths and gaps between them.
func movesV[T comparable](c *Comm, mk func(r, i int) T, k, root int) error {
	n, me := c.Size(), c.Rank()
	counts, displs, total := vlayout(n, k)
	mine := block(mk, me, -1, counts[me])
	check := func(what string, got []T, from func(r int) []T) error {
		for r := range n {
			if !slices.Equal(got[displs[r]:displs[r]+counts[r]], from(r)) {
				return fmt.Errorf("%s: block %d wrong", what, r)
			}
		}
		return nil
	}
	own := func(r int) []T { return block(mk, r, -1, counts[r]) }
	all := make([]T, total)
	if err := Gatherv(c, mine, all, counts, displs, root); err != nil {
		return fmt.Errorf("gatherv: %w", err)
	}
	if me == root {
		if err := check("gatherv", all, own); err != nil {
			return err
		}
	}
	all = make([]T, total)
	if err := Allgatherv(c, mine, all, counts, displs); err != nil {
		return fmt.Errorf("allgatherv: %w", err)
	}
	if err := check("allgatherv", all, own); err != nil {
		return err
	}
	send := make([]T, total)
	for r := range n {
		copy(send[displs[r]:], block(mk, root, r, counts[r]))
	}
	recv := make([]T, counts[me])
	if err := Scatterv(c, send, recv, counts, displs, root); err != nil {
		return fmt.Errorf("scatterv: %w", err)
	}
	if !slices.Equal(recv, block(mk, root, me, counts[me])) {
		return errors.New("scatterv: wrong elements")
	}
	// Alltoallv: rank s sends rank d counts[d] elements; rank d receives
	// counts[d] from every rank, at the layout's displacements of s.
	rc, rd := make([]int, n), make([]int, n)
	at := 0
	for s := range n {
		rc[s], rd[s] = counts[me], at
		at += counts[me] + 2
	}
	send, recv = make([]T, total), make([]T, at)
	for d := range n {
		copy(send[displs[d]:], block(mk, me, d, counts[d]))
	}
	if err := Alltoallv(c, send, counts, displs, recv, rc, rd); err != nil {
		return fmt.Errorf("alltoallv: %w", err)
	}
	for s := range n {
		if !slices.Equal(recv[rd[s]:rd[s]+rc[s]], block(mk, s, me, counts[me])) {
			return fmt.Errorf("alltoallv: block from %d wrong", s)
		}
	}
	return nil
}

func TestTypedDataCollectivesMatchTheSerialReference(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			run(t, n, Options{}, func(c *Comm) error {
				if err := moves(c, func(r, i int) float64 { return float64(r) + float64(i)/8 }); err != nil {
					return err
				}
				if err := moves(c, func(r, i int) particle { return particle{float32(i), -float32(r), int64(r)<<32 | int64(i)} }); err != nil {
					return err
				}
				return moves(c, func(r, i int) [3]int16 { return [3]int16{int16(r), int16(i), int16(r ^ i)} })
			})
		})
	}
}

// TestNonBlockingReductionsMatchTheSerialReference: Ireduce to every root
// and Iallreduce, waited for and tested, for every operation of two
// element types.
func TestNonBlockingReductionsMatchTheSerialReference(t *testing.T) {
	for _, n := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			run(t, n, Options{}, func(c *Comm) error {
				if err := ireductions[int32](c); err != nil {
					return err
				}
				return ireductions[float64](c)
			})
		})
	}
}

func ireductions[T Number](c *Comm) error {
	n, me := c.Size(), c.Rank()
	ops := []Op{Sum, Prod, Min, Max}
	if !coll.IsFloat[T]() {
		ops = append(ops, Band, Bor, Bxor)
	}
	for _, op := range ops {
		for _, count := range []int{0, 1, 7 * n, 2000} {
			mine := make([]T, count)
			for i := range mine {
				mine[i] = elem[T](op, me, i)
			}
			want := serial[T](op, n, count)
			for _, m := range []completion{waited, tested} {
				what := fmt.Sprintf("%v %v of %d, %v", reflect.TypeFor[T](), op, count, m)
				recv := make([]T, count)
				if err := complete(c, m, nil, func() (*Request, error) { return Iallreduce(c, mine, recv, op) }); err != nil {
					return fmt.Errorf("iallreduce %s: %w", what, err)
				}
				if !slices.Equal(recv, want) {
					return fmt.Errorf("iallreduce %s: %v, want %v", what, recv, want)
				}
				for _, root := range slices.Compact([]int{0, n / 2, n - 1}) {
					recv := make([]T, count)
					if err := complete(c, m, nil, func() (*Request, error) { return Ireduce(c, mine, recv, op, root) }); err != nil {
						return fmt.Errorf("ireduce %s to %d: %w", what, root, err)
					}
					if me == root && !slices.Equal(recv, want) {
						return fmt.Errorf("ireduce %s to %d: %v, want %v", what, root, recv, want)
					}
				}
			}
		}
	}
	return nil
}

// TestSeveralNonBlockingCollectivesInFlightAtOnce: every kind started
// before any is waited for, completed together by one Waitall.
func TestSeveralNonBlockingCollectivesInFlightAtOnce(t *testing.T) {
	run(t, 4, Options{}, func(c *Comm) error {
		n, me := c.Size(), c.Rank()
		bc := make([]int64, 100)
		if me == 1 {
			for i := range bc {
				bc[i] = int64(i * 3)
			}
		}
		sum, red := make([]int64, 2), make([]int64, 2)
		gat, all := make([]int32, n), make([]int32, n)
		sca := make([]int32, 1)
		scaSend := []int32{10, 11, 12, 13}
		a2aS, a2aR := make([]int16, n), make([]int16, n)
		for d := range n {
			a2aS[d] = int16(me*10 + d)
		}
		var rs []*Request
		for _, start := range []func() (*Request, error){
			func() (*Request, error) { return Ibcast(c, bc, 1) },
			func() (*Request, error) { return Iallreduce(c, []int64{int64(me), 1}, sum, Sum) },
			func() (*Request, error) { return Ireduce(c, []int64{int64(me), 1}, red, Max, 2) },
			func() (*Request, error) { return Igather(c, []int32{int32(me)}, gat, 3) },
			func() (*Request, error) { return Iallgather(c, []int32{int32(me * me)}, all) },
			func() (*Request, error) { return Iscatter(c, scaSend, sca, 0) },
			func() (*Request, error) { return Ialltoall(c, a2aS, a2aR) },
			func() (*Request, error) { return Ibarrier(c) },
		} {
			r, err := start()
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		if err := c.Waitall(rs, nil); err != nil {
			return err
		}
		switch {
		case bc[99] != 297:
			return fmt.Errorf("ibcast: %d", bc[99])
		case sum[0] != 6 || sum[1] != 4:
			return fmt.Errorf("iallreduce: %v", sum)
		case me == 2 && (red[0] != 3 || red[1] != 1):
			return fmt.Errorf("ireduce: %v", red)
		case me == 3 && !slices.Equal(gat, []int32{0, 1, 2, 3}):
			return fmt.Errorf("igather: %v", gat)
		case !slices.Equal(all, []int32{0, 1, 4, 9}):
			return fmt.Errorf("iallgather: %v", all)
		case sca[0] != int32(10+me):
			return fmt.Errorf("iscatter: %v", sca)
		}
		for s := range n {
			if a2aR[s] != int16(s*10+me) {
				return fmt.Errorf("ialltoall: %v", a2aR)
			}
		}
		return nil
	})
}

// TestTypedCollectivesRefuseElementsThatAreNotPlainData: elements with a
// pointer anywhere, or of size zero, fail every typed form with
// ErrInvalid before anything is sent; so do alltoall lengths that the
// ranks do not divide.
func TestTypedCollectivesRefuseElementsThatAreNotPlainData(t *testing.T) {
	type named struct {
		X    float64
		Name string
	}
	type nested struct{ P [2]struct{ Q *int } }
	run(t, 2, Options{}, func(c *Comm) error {
		for what, err := range map[string]error{
			"bcast of strings":          Bcast(c, []string{"a"}, 0),
			"gather of structs":         Gather(c, []named{{}}, make([]named, 2), 0),
			"allgather of nested ptrs":  Allgather(c, []nested{{}}, make([]nested, 2)),
			"scatterv of slices":        Scatterv(c, [][]int{{1}, {2}}, make([][]int, 1), []int{1, 1}, []int{0, 1}, 0),
			"alltoall of empty structs": Alltoall(c, make([]struct{}, 2), make([]struct{}, 2)),
			"alltoall of 3 over 2":      Alltoall(c, make([]int, 3), make([]int, 3)),
			"alltoall of unequal":       Alltoall(c, make([]int, 2), make([]int, 4)),
		} {
			if !errors.Is(err, ErrInvalid) {
				return fmt.Errorf("%s: %v, want ErrInvalid", what, err)
			}
		}
		for what, start := range map[string]func() (*Request, error){
			"ibcast of maps":      func() (*Request, error) { return Ibcast(c, []map[int]int{nil}, 0) },
			"igather of funcs":    func() (*Request, error) { return Igather(c, []func(){nil}, make([]func(), 2), 0) },
			"iallgather of chans": func() (*Request, error) { return Iallgather(c, []chan int{nil}, make([]chan int, 2)) },
			"iscatter of ifaces":  func() (*Request, error) { return Iscatter(c, []any{1, 2}, make([]any, 1), 0) },
			"ialltoall of ptrs":   func() (*Request, error) { return Ialltoall(c, []*int{nil, nil}, []*int{nil, nil}) },
		} {
			if r, err := start(); !errors.Is(err, ErrInvalid) || r != nil {
				return fmt.Errorf("%s: %v, %v; want no request and ErrInvalid", what, r, err)
			}
		}
		// Nothing was sent: the next collective pairs up.
		return sumOfOnes(c)
	})
}

// TestTypedCollectivesInSteadyStateAllocateNothing: the typed forms view
// the caller's slices as bytes, and the v-forms convert their counts on
// the stack.
func TestTypedCollectivesInSteadyStateAllocateNothing(t *testing.T) {
	run(t, 2, Options{}, func(c *Comm) error {
		buf := []particle{{1, 2, 3}, {4, 5, 6}}
		send, recv := []float32{1, 2}, make([]float32, 4)
		counts, displs := []int{2, 2}, []int{0, 2}
		step := func() {
			if err := Bcast(c, buf, 0); err != nil {
				panic(err)
			}
			if err := Allgatherv(c, send, recv, counts, displs); err != nil {
				panic(err)
			}
		}
		for range 100 {
			step()
		}
		if c.Rank() == 1 {
			for range 1001 {
				step()
			}
			return nil
		}
		if a := testing.AllocsPerRun(1000, step); a != 0 {
			return fmt.Errorf("a typed bcast and allgatherv allocate %v times", a)
		}
		return nil
	})
}
