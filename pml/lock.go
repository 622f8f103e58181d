package pml

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// engineLock serialises the engine. Most programs drive a communicator
// from one goroutine, and for them even an uncontended mutex costs two
// locked instructions per call (the compare-and-swap of Lock and the add
// of Unlock), which on a message-rate loop is a large part of the time.
// So the lock is biased, as the JVM's biased locks are: the first
// goroutine to take it becomes its owner and from then on takes it with
// plain loads and stores; the mutex is used only once a second goroutine
// has called in.
//
// The owner announces itself with a plain store of inside and then reads
// revoke; a second goroutine stores revoke and then reads inside. That is
// Dekker's protocol, which needs a store-load barrier on both sides; the
// owner's side gets it from the other side's membarrier(2), which runs a
// full barrier on every CPU that runs a thread of this process (the
// asymmetric fence of userspace RCU). After the revocation every call
// takes the mutex: a program with two driving goroutines pays what it
// paid before, once.
//
// Where the fast path cannot be built (no membarrier, another
// architecture, the race detector, which cannot see the asymmetric
// fence) or would be revoked at once (the rdma_read_async progress
// thread), the lock is the plain mutex.
type engineLock struct {
	// owner, inside, revoke and fast come first: lockFast and unlockFast
	// (assembly) use them at offsets 0, 8, 12 and 16.

	// owner is the g of the goroutine the lock is biased to, 0 before the
	// first Lock.
	owner  uintptr
	inside uint32 // the owner holds the lock without mu
	revoke uint32 // another goroutine took the lock: the bias is over
	fast   uint32 // the holder took the lock without mu (the holder's own)
	mu     sync.Mutex
	off    bool // never bias
}

// Lock takes the lock. It is inlined into its callers: one call to
// lockFast, which takes the lock of the goroutine it is biased to with
// plain loads and stores and leaves anything else to lockSlow.
func (l *engineLock) Lock() { lockFast(l) }

// Unlock releases the lock: inlined, one call to unlockFast, which
// leaves the biased lock with a release store and a mutex to
// unlockSlow.
func (l *engineLock) Unlock() { unlockFast(l) }

// lockSlow takes the mutex and, the first time, biases the lock to the
// caller; the first time another goroutine comes, it revokes the bias and
// waits until the owner has left its critical section.
func lockSlow(l *engineLock) {
	l.mu.Lock()
	if l.off {
		return
	}
	if l.revoke == 0 {
		g := getg()
		switch o := l.owner; {
		case o == 0:
			if !biasable() {
				l.off = true
				return
			}
			atomic.StoreUintptr(&l.owner, g)
			return
		case o == g: // not reached: the owner's lockFast succeeds
			return
		}
		l.revokeBias()
	}
	// A TryLock may have revoked the bias and given up while the owner
	// was inside: whoever holds mu after a bias waits for it to leave.
	for l.owner != 0 && atomic.LoadUint32(&l.inside) != 0 {
		runtime.Gosched() // the owner may need this P to get out
	}
}

// revokeBias ends the bias (mu held): after it, the owner either is seen
// inside or sees revoke on its next Lock.
func (l *engineLock) revokeBias() {
	atomic.StoreUint32(&l.revoke, 1)
	membarrier()
}

// TryLock takes the lock if it is free (for diagnostics from another
// goroutine); it revokes the bias.
func (l *engineLock) TryLock() bool {
	if !l.mu.TryLock() {
		return false
	}
	if l.off || l.owner == 0 {
		return true
	}
	if l.revoke == 0 {
		l.revokeBias()
	}
	if atomic.LoadUint32(&l.inside) != 0 {
		l.mu.Unlock()
		return false
	}
	return true
}

// unlockSlow releases the mutex.
func unlockSlow(l *engineLock) { l.mu.Unlock() }

// disable keeps the lock a plain mutex; call it before the engine is
// shared between goroutines.
func (l *engineLock) disable() { l.off = true }
