//go:build linux && amd64 && !race

package pml

import (
	"sync"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands (linux/membarrier.h).
const (
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

var biasOK = sync.OnceValue(func() bool {
	_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0)
	return errno == 0
})

// biasable reports whether the process may use the biased fast path: it
// needs the expedited private membarrier (Linux 4.14), which a container's
// seccomp filter may refuse.
func biasable() bool { return biasOK() }

// membarrier runs a full memory barrier on every CPU running a thread of
// this process.
func membarrier() {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0); errno != 0 {
		panic("pml: membarrier failed after registration: " + errno.Error())
	}
}

// lockFast is the owner's side of the lock: if the running goroutine
// owns the lock, it stores inside and then, if revoke is still clear,
// sets fast (the lock is held); otherwise it clears inside again and
// goes on in lockSlow. Plain loads and stores, and no Go frame.
//
//go:noescape
func lockFast(l *engineLock)

// unlockFast clears fast and then inside — a plain store, a release on
// amd64 (TSO), which the call keeps the compiler from moving stores of
// the critical section across — if the lock was taken by lockFast, and
// otherwise goes on in unlockSlow.
//
//go:noescape
func unlockFast(l *engineLock)

// getg returns the running goroutine's g pointer: an identity that stays
// the goroutine's while it lives.
//
//go:nosplit
func getg() uintptr
