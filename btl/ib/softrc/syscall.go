package softrc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The wire's system calls. Polls and PostSend make them raw — no
// entersyscall/exitsyscall, the scheduler never learns of them — which is
// safe only for a call that cannot block: a raw call that sleeps holds
// its thread and its P. So every one of them passes MSG_DONTWAIT, which
// makes that one call non-blocking whatever the socket's mode; a link's
// socket is non-blocking as well, but the calls do not depend on it
// (TestWireCallsDoNotBlockOnABlockingSocket).
//
// They are recvfrom, sendto and sendmsg rather than read, write and
// writev: the socket calls go to the socket layer directly, where read
// and write pass the VFS first (vfs_read, rw_verify_area,
// security_file_permission, sock_read_iter: 13 % of a spinning rank's
// samples in the latency ping-pong). An empty poll of a loopback socket
// costs ~60 ns less, and a poll's period is what a message waits for its
// reader. MSG_NOSIGNAL: a peer gone raises EPIPE, never SIGPIPE.

// recvNB reads what the socket holds into b, without blocking.
func recvNB(fd int, b []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

// sendNB writes b as far as the socket takes it, without blocking.
func sendNB(fd int, b []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	return int(r), e
}

// sendvNB writes the buffers of iov in order as far as the socket takes
// them, without blocking; msg is the caller's header (kept in the device,
// so that the call allocates nothing).
func sendvNB(fd int, msg *unix.Msghdr, iov []unix.Iovec) (int, unix.Errno) {
	msg.Iov = &iov[0]
	msg.SetIovlen(len(iov))
	r, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(msg)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	msg.Iov = nil
	return int(r), e
}
