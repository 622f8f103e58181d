package launch

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/core"
)

// flakyListener fails its first accepts as a process out of descriptors
// does.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An accept error is waited out and the bootstrap serves on: the old loop
// returned at its first error, and the job's ranks then waited for a
// hello that nobody would answer.
func TestTheServerServesOnAfterAcceptErrors(t *testing.T) {
	old := wrapListener
	wrapListener = func(ln net.Listener) net.Listener {
		f := &flakyListener{Listener: ln}
		f.fails.Store(6)
		return f
	}
	_, path, job := testServer(t, 2, HelloTimeout)
	wrapListener = old
	bothRanksExchange(t, path, job)
}

// Connections that never say hello hold at most core.MaxPending of the
// launcher's descriptors, however many come, and the job's ranks still
// get in.
func TestSilentConnectionsHoldABoundedNumberOfDescriptors(t *testing.T) {
	fdCount := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd to count descriptors in")
		}
		return len(ents)
	}
	const flood = core.MaxPending + 300
	srv, path, job := testServer(t, 2, 10*time.Minute)
	base := fdCount()
	for range flood {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	held := func() int { return fdCount() - base - flood }
	for deadline := time.Now().Add(time.Minute); srv.pending.Len() != core.MaxPending || held() > core.MaxPending+4; {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %d pending, %d descriptors held", srv.pending.Len(), held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	bothRanksExchange(t, path, job)
	t.Logf("%d silent connections, %d descriptors held by the server", flood, held())
}
