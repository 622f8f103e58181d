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

// biasEnter is the owner's side of the lock: if the running goroutine
// owns the lock, it stores inside and then, if revoke is still clear,
// reports true (the lock is held); otherwise it clears inside again and
// reports false. One call, plain loads and stores.
//
//go:noescape
func biasEnter(l *engineLock) bool

// getg returns the running goroutine's g pointer: an identity that stays
// the goroutine's while it lives.
//
//go:nosplit
func getg() uintptr
