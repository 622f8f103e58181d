package pml

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestEngineLockExcludesLateGoroutines biases the lock to one goroutine
// and then lets others in while the owner keeps going, one of them by
// TryLock: no two may ever
// hold it at once and no increment may be lost, whichever path each took.
func TestEngineLockExcludesLateGoroutines(t *testing.T) {
	var l engineLock
	var held atomic.Bool
	count := 0
	crit := func(try bool) {
		if try {
			for !l.TryLock() { // as State does from a reporting goroutine
				runtime.Gosched()
			}
		} else {
			l.Lock()
		}
		if held.Swap(true) {
			t.Error("two goroutines hold the engine lock")
		}
		c := count
		for i := 0; i < 50; i++ { // widen the window a revocation must respect
			c += i & 1
		}
		count = c - 25 + 1
		held.Store(false)
		l.Unlock()
	}
	const owner, others, each = 100000, 4, 5000
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < owner; i++ {
			if i == 1000 {
				close(started) // biased by now; others come in mid-stream
			}
			crit(false)
		}
	}()
	<-started
	for g := 0; g < others; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				crit(g == 0)
			}
		}()
	}
	wg.Wait()
	if want := owner + others*each; count != want {
		t.Fatalf("count %d, want %d: increments lost", count, want)
	}
	if biasable() && l.revoke == 0 {
		t.Fatal("other goroutines took the lock but the bias was never revoked")
	}
}

// TestEngineLockLayout pins the offsets lockFast's and unlockFast's
// assembly uses.
func TestEngineLockLayout(t *testing.T) {
	var l engineLock
	if unsafe.Offsetof(l.owner) != 0 || unsafe.Offsetof(l.inside) != 8 || unsafe.Offsetof(l.revoke) != 12 || unsafe.Offsetof(l.fast) != 16 {
		t.Fatalf("engineLock fields at %d, %d, %d, %d; the assembly uses 0, 8, 12, 16",
			unsafe.Offsetof(l.owner), unsafe.Offsetof(l.inside), unsafe.Offsetof(l.revoke), unsafe.Offsetof(l.fast))
	}
}

// TestEngineLockBiasesToOneDriver: a lone goroutine takes the fast path.
func TestEngineLockBiasesToOneDriver(t *testing.T) {
	if !biasable() {
		t.Skip("no biased lock here (race detector, no membarrier, or not linux/amd64)")
	}
	var l engineLock
	l.Lock()
	l.Unlock()
	l.Lock()
	fast := l.fast != 0
	l.Unlock()
	if !fast {
		t.Fatal("the second Lock of the only goroutine took the mutex")
	}
}

// TestCommSharedByGoroutines drives each rank from one goroutine (which
// biases its engine lock) and then from several at once, each with its
// own tag: every message must arrive intact and in order.
func TestCommSharedByGoroutines(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	const workers, msgs = 4, 300
	w.run(t, func(c *Comm) error {
		peer := 1 - c.Rank()
		one := func(tag, i int) error {
			out, in := pattern(make([]byte, 64+i%3000), tag*1000+i), make([]byte, 4096)
			if c.Rank() == 0 {
				if err := c.Send(out, peer, tag); err != nil {
					return err
				}
				st, err := c.Recv(in, peer, tag)
				if err != nil {
					return err
				}
				if !bytes.Equal(in[:st.Count], out) {
					return fmt.Errorf("tag %d message %d came back corrupted", tag, i)
				}
				return nil
			}
			st, err := c.Recv(in, peer, tag)
			if err != nil {
				return err
			}
			return c.Send(in[:st.Count], peer, tag)
		}
		for i := 0; i < 50; i++ { // one driver first
			if err := one(workers, i); err != nil {
				return err
			}
		}
		errs := make(chan error, workers)
		for g := 0; g < workers; g++ {
			go func() {
				for i := 0; i < msgs; i++ {
					if err := one(g, i); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for g := 0; g < workers; g++ {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	})
}
