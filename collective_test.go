package gobtl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gobtl/gobtl/coll"
)

// The root package's collectives: the typed reductions for every
// operation and element type, Split, the non-blocking forms, contexts, and
// collectives and point-to-point sharing one communicator. The algorithms
// themselves are tested one by one in package coll.

// run runs fn on n goroutine ranks and fails the test on any error.
func run(t *testing.T, n int, opts Options, fn func(c *Comm) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := RunLocal(ctx, n, opts, fn); err != nil {
		t.Fatal(err)
	}
}

// elem is rank r's i-th element as a T: small integers, exact in every
// type and in every order of combination, so the serial reference is
// exact. Prod uses 1, 2 and −1 (as the type allows) so that products of
// nine ranks stay in range.
func elem[T Number](op Op, r, i int) T {
	v := (r*7 + i*3) % 11
	if op == Prod {
		v = []int{1, 2, 1, 1}[(r+i)%4]
	}
	return T(v)
}

func serial[T Number](op Op, n, count int) []T {
	out := make([]T, count)
	for i := range out {
		acc := elem[T](op, 0, i)
		for r := 1; r < n; r++ {
			x := elem[T](op, r, i)
			switch op {
			case Sum:
				acc += x
			case Prod:
				acc *= x
			case Min:
				acc = min(acc, x)
			case Max:
				acc = max(acc, x)
			default: // the bitwise ones, on the bytes
				av := []T{acc}
				a, b := coll.Bytes(av), coll.Bytes([]T{x})
				for k := range a {
					switch op {
					case Band:
						a[k] &= b[k]
					case Bor:
						a[k] |= b[k]
					case Bxor:
						a[k] ^= b[k]
					}
				}
				acc = av[0]
			}
		}
		out[i] = acc
	}
	return out
}

// reductions checks Allreduce, Reduce to every root, Scan, Exscan and
// ReduceScatterBlock of T with every operation it supports, in place and
// not, on lengths 0, 1 and several per rank.
func reductions[T Number](c *Comm) error {
	n, me := c.Size(), c.Rank()
	isFloat := reflect.TypeFor[T]().Kind() == reflect.Float32 || reflect.TypeFor[T]().Kind() == reflect.Float64
	for _, op := range []Op{Sum, Prod, Min, Max, Band, Bor, Bxor} {
		if isFloat && op >= Band {
			if err := Allreduce(c, []T{1}, make([]T, 1), op); !errors.Is(err, ErrInvalid) {
				return fmt.Errorf("%v of floats: %v, want ErrInvalid", op, err)
			}
			continue
		}
		for _, count := range []int{0, 1, 5 * n} {
			mine := func() []T {
				v := make([]T, count)
				for i := range v {
					v[i] = elem[T](op, me, i)
				}
				return v
			}
			what := fmt.Sprintf("%v %v of %d", reflect.TypeFor[T](), op, count)
			want := serial[T](op, n, count)
			for _, inPlace := range []bool{false, true} {
				send := mine()
				recv := make([]T, count)
				if inPlace {
					recv = send
				}
				if err := Allreduce(c, send, recv, op); err != nil {
					return fmt.Errorf("allreduce %s: %w", what, err)
				}
				if !slices.Equal(recv, want) {
					return fmt.Errorf("allreduce %s, in place %v: %v, want %v", what, inPlace, recv, want)
				}
			}
			for _, root := range []int{0, n / 2, n - 1} {
				recv := make([]T, count)
				if err := Reduce(c, mine(), recv, op, root); err != nil {
					return fmt.Errorf("reduce %s to %d: %w", what, root, err)
				}
				if me == root && !slices.Equal(recv, want) {
					return fmt.Errorf("reduce %s to %d: %v, want %v", what, root, recv, want)
				}
			}
			scan := make([]T, count)
			if err := Scan(c, mine(), scan, op); err != nil {
				return fmt.Errorf("scan %s: %w", what, err)
			}
			if w := serial[T](op, me+1, count); !slices.Equal(scan, w) {
				return fmt.Errorf("scan %s: %v, want %v", what, scan, w)
			}
			if me > 0 {
				ex := make([]T, count)
				if err := Exscan(c, mine(), ex, op); err != nil {
					return fmt.Errorf("exscan %s: %w", what, err)
				}
				if w := serial[T](op, me, count); !slices.Equal(ex, w) {
					return fmt.Errorf("exscan %s: %v, want %v", what, ex, w)
				}
			} else if err := Exscan(c, mine(), make([]T, count), op); err != nil {
				return fmt.Errorf("exscan %s: %w", what, err)
			}
			// Reduce-scatter: n blocks of count elements, block b of rank
			// r holding elements b·count … of rank r's vector.
			all := make([]T, n*count)
			for i := range all {
				all[i] = elem[T](op, me, i)
			}
			blk := make([]T, count)
			if err := ReduceScatterBlock(c, all, blk, op); err != nil {
				return fmt.Errorf("reduce_scatter_block %s: %w", what, err)
			}
			if w := serial[T](op, n, n*count)[me*count : (me+1)*count]; !slices.Equal(blk, w) {
				return fmt.Errorf("reduce_scatter_block %s: %v, want %v", what, blk, w)
			}
		}
	}
	return nil
}

type myInt int32

// TestTypedReductionsOfEveryOperationAndElementType: the plumbing from
// a Go type and an Op to the collective layer, for every type and
// operation (package coll tests every algorithm on 1 to 9 ranks).
func TestTypedReductionsOfEveryOperationAndElementType(t *testing.T) {
	every := []func(*Comm) error{
		reductions[int], reductions[int8], reductions[int16], reductions[int32], reductions[int64],
		reductions[uint], reductions[uint8], reductions[uint16], reductions[uint32], reductions[uint64],
		reductions[uintptr], reductions[float32], reductions[float64], reductions[myInt],
	}
	ns := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	if raceEnabled {
		ns = []int{1, 3, 4}
	}
	for _, n := range ns {
		fs := every
		if n != 1 && n != 4 && n != 7 {
			fs = []func(*Comm) error{reductions[int64], reductions[float64], reductions[uint8]}
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			run(t, n, Options{}, func(c *Comm) error {
				for _, f := range fs {
					if err := f(c); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

func TestFloatingPointSumsAreTheSameBitsOnEveryRankAndEveryRun(t *testing.T) {
	const count = 4096
	for _, alg := range []string{"recursive_doubling", "rabenseifner", "ring", "reduce_bcast", "shm"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			stack := filepath.Join(dir, "stack.hcl")
			os.WriteFile(stack, []byte(`btl "inproc" "a" {}`+"\ncoll {\n  allreduce = \""+alg+"\"\n}\n"), 0o644)
			results := make([][]float64, 7)
			run(t, 7, Options{ConfigFiles: []string{stack}}, func(c *Comm) error {
				rng := rand.New(rand.NewPCG(uint64(c.Rank()), 1))
				send := make([]float64, count)
				for i := range send {
					send[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
				}
				first := make([]float64, count)
				if err := Allreduce(c, send, first, Sum); err != nil {
					return err
				}
				for range 3 {
					again := make([]float64, count)
					if err := Allreduce(c, send, again, Sum); err != nil {
						return err
					}
					if !sameBits(again, first) {
						return errors.New("two sums of the same vectors differ")
					}
				}
				results[c.Rank()] = first
				return nil
			})
			for r := 1; r < len(results); r++ {
				if !sameBits(results[r], results[0]) {
					t.Fatalf("rank %d's sum differs from rank 0's", r)
				}
			}
		})
	}
}

func sameBits(a, b []float64) bool {
	return len(a) == len(b) && slices.Equal(coll.Bytes(a), coll.Bytes(b))
}

// affine is x → A·x+B; composing maps does not commute.
type affine struct{ A, B int64 }

func TestAllreduceFuncCombinesInRankOrder(t *testing.T) {
	run(t, 6, Options{}, func(c *Comm) error {
		then := func(inout, in []affine) {
			for i := range inout {
				inout[i] = affine{in[i].A * inout[i].A, in[i].A*inout[i].B + in[i].B}
			}
		}
		mine := []affine{{int64(c.Rank() + 2), int64(c.Rank())}, {3, int64(-c.Rank())}}
		got := make([]affine, 2)
		if err := AllreduceFunc(c, mine, got, then); err != nil {
			return err
		}
		want := []affine{{2, 0}, {3, 0}}
		for r := 1; r < c.Size(); r++ {
			then(want, []affine{{int64(r + 2), int64(r)}, {3, int64(-r)}})
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("got %v, want %v", got, want)
		}
		type withPointer struct{ p *int }
		err := AllreduceFunc(c, make([]withPointer, 1), make([]withPointer, 1), func(_, _ []withPointer) {})
		if !errors.Is(err, ErrInvalid) {
			return fmt.Errorf("a type with a pointer: %v, want ErrInvalid", err)
		}
		return nil
	})
}

func TestSplitLeavesOutUndefinedRanksAndIsolatesColors(t *testing.T) {
	run(t, 7, Options{}, func(c *Comm) error {
		me := c.Rank()
		color := me % 2
		if me == 3 {
			color = Undefined
		}
		sub, err := c.Split(color, me)
		if err != nil {
			return err
		}
		if color == Undefined {
			if sub != nil {
				return errors.New("an Undefined rank got a communicator")
			}
			return c.Barrier()
		}
		// Evens 0,2,4,6; odds 1,5.
		want := map[int][]int{0: {0, 2, 4, 6}, 1: {1, 5}}[color]
		if sub.Size() != len(want) || want[sub.Rank()] != me {
			return fmt.Errorf("rank %d: %d of %d in color %d", me, sub.Rank(), sub.Size(), color)
		}
		sum := []int{me}
		if err := Allreduce(sub, sum, sum, Sum); err != nil {
			return err
		}
		total := 0
		for _, r := range want {
			total += r
		}
		if sum[0] != total {
			return fmt.Errorf("color %d sums to %d, want %d", color, sum[0], total)
		}
		// Point-to-point on the new ranks: a ring, AnySource.
		in := make([]byte, 1)
		st, err := sub.Sendrecv([]byte{byte(me)}, (sub.Rank()+1)%sub.Size(), 0, in, AnySource, 0)
		if err != nil {
			return err
		}
		prev := (sub.Rank() - 1 + sub.Size()) % sub.Size()
		if st.Source != prev || int(in[0]) != want[prev] {
			return fmt.Errorf("ring on color %d: from %d got %d", color, st.Source, in[0])
		}
		return c.Barrier()
	})
}

func TestNonBlockingCollectivesCompleteThroughWaitAndTest(t *testing.T) {
	run(t, 5, Options{}, func(c *Comm) error {
		me := c.Rank()
		buf := make([]byte, 100<<10)
		if me == 2 {
			for i := range buf {
				buf[i] = byte(i * 7)
			}
		}
		send := []float64{float64(me), 1}
		sum := make([]float64, 2)
		rb, err := Ibcast(c, buf, 2)
		if err != nil {
			return err
		}
		ra, err := Iallreduce(c, send, sum, Sum)
		if err != nil {
			return err
		}
		rr, err := Ibarrier(c)
		if err != nil {
			return err
		}
		// Point-to-point meanwhile, on the same communicator.
		in := make([]byte, 4)
		if _, err := c.Sendrecv([]byte("ping"), (me+1)%5, 1, in, (me+4)%5, 1); err != nil {
			return err
		}
		// Test until the broadcast is in, then wait for the rest.
		for {
			done, _, err := c.Test(rb)
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
		sts := make([]Status, 2)
		if err := c.Waitall([]*Request{ra, rr}, sts); err != nil {
			return err
		}
		for i := range buf {
			if buf[i] != byte(i*7) {
				return fmt.Errorf("broadcast byte %d is %d", i, buf[i])
			}
		}
		if sum[0] != 10 || sum[1] != 5 {
			return fmt.Errorf("sum %v", sum)
		}
		return nil
	})
}

func TestCollectivesAndPointToPointOnOneCommunicatorNeverMix(t *testing.T) {
	run(t, 4, Options{}, func(c *Comm) error {
		me, n := c.Rank(), c.Size()
		// Every rank posts wildcard receives first; collectives run while
		// they are pending and must not feed them; then the messages they
		// wait for come, and only those.
		const k = 3
		in := make([][]byte, k)
		rs := make([]*Request, k)
		for i := range rs {
			in[i] = make([]byte, 16)
			var err error
			if rs[i], err = c.Irecv(in[i], AnySource, AnyTag); err != nil {
				return err
			}
		}
		for range 5 {
			v := []int64{int64(me)}
			if err := Allreduce(c, v, v, Sum); err != nil {
				return err
			}
			if v[0] != int64(n*(n-1)/2) {
				return fmt.Errorf("sum %d", v[0])
			}
			b := make([]byte, 16)
			if err := c.Bcast(b, 0); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		if _, ok, _, _ := c.Testany(rs); ok {
			return errors.New("a wildcard receive matched a collective's message")
		}
		// No rank sends before every rank has looked.
		if err := c.Barrier(); err != nil {
			return err
		}
		for i := range k {
			if err := c.Send([]byte(fmt.Sprintf("p2p %d from %d", i, me)), (me+1)%n, 100+i); err != nil {
				return err
			}
		}
		sts := make([]Status, k)
		if err := c.Waitall(rs, sts); err != nil {
			return err
		}
		for i, st := range sts {
			want := fmt.Sprintf("p2p %d from %d", i, (me+n-1)%n)
			if st.Tag != 100+i || string(in[i][:st.Count]) != want {
				return fmt.Errorf("receive %d: tag %d %q, want %q", i, st.Tag, in[i][:st.Count], want)
			}
		}
		return nil
	})
}

func TestAContextEndsABlockedCollectiveAndItFinishesLater(t *testing.T) {
	run(t, 3, Options{}, func(c *Comm) error {
		if c.Rank() == 2 {
			// Late: the others give up waiting for it first.
			in := make([]byte, 1)
			if _, err := c.Recv(in, 0, 7); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			return sumOfOnes(c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		err := c.BarrierContext(ctx)
		var p *PendingError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &p) {
			return fmt.Errorf("barrier returned %v, want a *PendingError of the context's", err)
		}
		if err := c.Free(p.Request); err != nil {
			return err
		}
		// Rank 2 joins only once both have given up: a rank the machine
		// starved past its deadline must not find the barrier done.
		if c.Rank() == 1 {
			if err := c.Send([]byte{1}, 0, 8); err != nil {
				return err
			}
		} else {
			in := make([]byte, 1)
			if _, err := c.Recv(in, 1, 8); err != nil {
				return err
			}
			if err := c.Send([]byte{1}, 2, 7); err != nil {
				return err
			}
		}
		// The abandoned barrier completes in the background; the next
		// collective works.
		return sumOfOnes(c)
	})
}

// sumOfOnes checks an allreduce of one 1 per rank.
func sumOfOnes(c *Comm) error {
	v := []int{1}
	if err := Allreduce(c, v, v, Sum); err != nil {
		return err
	}
	if v[0] != c.Size() {
		return fmt.Errorf("sum %d on %d ranks", v[0], c.Size())
	}
	return nil
}

func TestReductionsInSteadyStateAllocateNothing(t *testing.T) {
	run(t, 2, Options{}, func(c *Comm) error {
		v := []float64{1}
		step := func() {
			if err := Allreduce(c, v, v, Sum); err != nil {
				panic(err)
			}
		}
		for range 100 {
			step()
		}
		// Both ranks run the same count: AllocsPerRun runs one more.
		if c.Rank() == 1 {
			for range 1001 {
				step()
			}
			return nil
		}
		if a := testing.AllocsPerRun(1000, step); a != 0 {
			return fmt.Errorf("an 8-byte allreduce allocates %v times", a)
		}
		return nil
	})
}

// TestACollectiveWhoseContextEndsReturnsARequestThatSaysWhenItsBuffersAreFree:
// rank 0's allreduce starts with a context that has ended, before the
// other ranks join. It returns a *PendingError; the collective goes on
// with rank 0's vectors, and once Wait returns on the error's request
// they hold the sum and are rank 0's: it overwrites them, the job runs
// more collectives, and nothing writes them again. A request that
// completed before the collective was done with them fails the sum or
// the overwrite check (and the race detector).
func TestACollectiveWhoseContextEndsReturnsARequestThatSaysWhenItsBuffersAreFree(t *testing.T) {
	const n, count = 4, 8 << 10
	ready := make(chan struct{})
	run(t, n, Options{}, func(c *Comm) error {
		me := c.Rank()
		send, recv := make([]float64, count), make([]float64, count)
		for i := range send {
			send[i] = float64(me*count + i)
		}
		var wrong []error
		if me != 0 {
			<-ready
			if err := Allreduce(c, send, recv, Sum); err != nil {
				return err
			}
		} else {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := AllreduceContext(ctx, c, send, recv, Sum)
			var p *PendingError
			if !errors.As(err, &p) || !errors.Is(err, context.Canceled) {
				close(ready)
				return fmt.Errorf("an allreduce whose context ended: %v, want a *PendingError", err)
			}
			if done, _, err := c.Test(p.Request); done || err != nil {
				wrong = append(wrong, fmt.Errorf("the request is done (%v, %v) before the other ranks joined", done, err))
			}
			close(ready)
			if _, err := c.Wait(p.Request); err != nil {
				wrong = append(wrong, err)
			}
			for i, v := range recv {
				if want := float64(n*i + count*n*(n-1)/2); v != want {
					wrong = append(wrong, fmt.Errorf("element %d is %v once the request completed, want %v", i, v, want))
					break
				}
			}
			for i := range recv {
				send[i], recv[i] = -1, -2
			}
		}
		// More collectives; then nothing may have written rank 0's
		// vectors.
		if err := c.Barrier(); err != nil {
			return err
		}
		if err := sumOfOnes(c); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			if i := slices.IndexFunc(send, func(v float64) bool { return v != -1 }); i >= 0 {
				wrong = append(wrong, fmt.Errorf("send[%d] is %v after the request completed and was overwritten", i, send[i]))
			}
			if i := slices.IndexFunc(recv, func(v float64) bool { return v != -2 }); i >= 0 {
				wrong = append(wrong, fmt.Errorf("recv[%d] is %v after the request completed and was overwritten", i, recv[i]))
			}
		}
		return errors.Join(wrong...)
	})
}
