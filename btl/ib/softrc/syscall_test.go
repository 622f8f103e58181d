package softrc

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The wire's raw calls must not block even on a blocking socket: a raw
// call that sleeps holds its thread and its P, unseen by the scheduler.
// On a blocking socket pair with nothing to read and a full send buffer,
// each returns EAGAIN at once. A call that blocked is released when the
// peer shuts the connection down, and then returns end of file or EPIPE
// instead.
func TestWireCallsDoNotBlockOnABlockingSocket(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		// A raw call that blocks keeps the only P: nothing could release it.
		t.Skip("needs GOMAXPROCS >= 2 to release a call that blocks")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	a, b := fds[0], fds[1]
	defer unix.Close(a)
	defer unix.Close(b)
	if fl, err := unix.FcntlInt(uintptr(a), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("socket flags %#x (%v): want a blocking socket", fl, err)
	}
	unix.SetsockoptInt(a, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	var released atomic.Bool
	release := time.AfterFunc(5*time.Second, func() {
		released.Store(true)
		unix.Shutdown(b, unix.SHUT_RDWR)
	})
	defer release.Stop()

	buf := make([]byte, 4096)
	if n, e := recvNB(a, buf); e != unix.EAGAIN || released.Load() {
		t.Fatalf("recvNB on an empty blocking socket: %d bytes, errno %v, released by the peer's shutdown: %v; want EAGAIN at once", n, e, released.Load())
	}
	full := false
	for range 1 << 12 {
		n, e := sendNB(a, buf)
		if e == unix.EAGAIN {
			full = true
			break
		}
		if e != 0 || released.Load() {
			t.Fatalf("sendNB on a blocking socket: %d bytes, errno %v, released by the peer's shutdown: %v; want EAGAIN once full", n, e, released.Load())
		}
	}
	if !full {
		t.Fatal("sendNB never found the socket full")
	}
	var msg unix.Msghdr
	iov := []unix.Iovec{{Base: &buf[0], Len: 2048}, {Base: &buf[2048], Len: 2048}}
	if n, e := sendvNB(a, &msg, iov); e != unix.EAGAIN || released.Load() {
		t.Fatalf("sendvNB on a full blocking socket: %d bytes, errno %v, released by the peer's shutdown: %v; want EAGAIN at once", n, e, released.Load())
	}
	if msg.Iov != nil {
		t.Error("sendvNB left the header pointing at the caller's iovecs")
	}
}

// The wire's calls allocate nothing.
func TestWireCallsAllocateNothing(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf := make([]byte, 64)
	var msg unix.Msghdr
	iov := []unix.Iovec{{Base: &buf[0], Len: 32}, {Base: &buf[32], Len: 32}}
	if n := testing.AllocsPerRun(100, func() {
		sendNB(fds[0], buf)
		sendvNB(fds[0], &msg, iov)
		recvNB(fds[1], buf)
		recvNB(fds[1], buf)
	}); n != 0 {
		t.Errorf("%v allocations per send, sendv and two receives, want 0", n)
	}
}
