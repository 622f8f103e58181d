package softrc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/internal/jobfile"
)

func linkName(t *testing.T) string {
	return fmt.Sprintf("test-%s-%d", t.Name(), os.Getpid())
}

// Two ports on one link: greedy senders on both get rate·T + burst
// between them, not each, and each gets a fair part of it.
func TestASharedLinkIsOneRateForAllItsPorts(t *testing.T) {
	const rate = 250e6
	name := linkName(t)
	a, err := openSharedBucket(name, rate)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := openSharedBucket(name, rate)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	// Each polls at a random moment of every 10 µs, as two processes do,
	// and always has data waiting.
	rng := rand.New(rand.NewPCG(1, 2))
	start := nowNS()
	a.wait(start, +1)
	b.wait(start, +1)
	var sentA, sentB int
	for now := start; now <= start+int64(time.Second); now += 10_000 {
		ta, tb := now+rng.Int64N(10_000), now+rng.Int64N(10_000)
		first, second, sf, ss := a, b, &sentA, &sentB
		if tb < ta {
			ta, tb = tb, ta
			first, second, sf, ss = b, a, &sentB, &sentA
		}
		n := first.allow(ta, 1<<20)
		first.take(n)
		*sf += n
		n = second.allow(tb, 1<<20)
		second.take(n)
		*ss += n
	}
	total := float64(sentA + sentB)
	if max := rate*1.0 + a.burst; total > max+1 || total < rate-a.burst/2-rate*10e-6 {
		t.Fatalf("two ports on a %.0f B/s link sent %.0f bytes in 1s, want at most %.0f", rate, total, max)
	}
	if share := float64(sentA) / total; share < 0.3 || share > 0.7 {
		t.Fatalf("one port got %.0f%% of the link", 100*share)
	}
}

func TestAPortMustGiveTheLinkItsRateAndTheLastOneOutRemovesIt(t *testing.T) {
	name := linkName(t)
	a, err := openSharedBucket(name, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(linkPath(name)); err != nil {
		t.Fatalf("no link file: %v", err)
	}
	if _, err := openSharedBucket(name, 250e6); err == nil || !strings.Contains(err.Error(), "same rate") {
		t.Fatalf("a port with another rate attached to the link: %v", err)
	}
	b, err := openSharedBucket(name, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	a.close()
	if _, err := os.Stat(linkPath(name)); err != nil {
		t.Fatalf("the link file went while a port is on it: %v", err)
	}
	b.close()
	if _, err := os.Stat(linkPath(name)); !os.IsNotExist(err) {
		t.Fatalf("the last port left and the link file stayed: %v", err)
	}
	c, err := openSharedBucket(name, 250e6)
	if err != nil {
		t.Fatalf("a new link of another rate after the old one is gone: %v", err)
	}
	c.close()
	if _, err := openSharedBucket(name, 0); err == nil {
		t.Fatal("a shared link without a rate")
	}
}

// TestTwoDevicesOnASharedLinkShareItsRate: the ports of two devices (two
// hosts' worth of softrc in one process, as two processes would be) name
// one link; RDMA writes from both together move no faster than the link.
// Load on the machine can only slow them, so the bound holds on any
// machine.
func TestTwoDevicesOnASharedLinkShareItsRate(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 16 MiB at 50 MB/s")
	}
	const rate = 50e6
	const size = 8 << 20
	pc := PortConfig{Rate: rate, Link: linkName(t)}
	b := newEnd(t, endOpts{})
	var ends []*end
	for i := 0; i < 2; i++ {
		a := newEnd(t, endOpts{port: pc})
		c := newEnd(t, endOpts{sharedDev: b.dev})
		connect(t, a, c, defaultRC())
		ends = append(ends, a, c)
	}
	if _, err := os.Stat(linkPath(pc.Link)); err != nil {
		t.Fatalf("no link file: %v", err)
	}
	start := time.Now()
	for i := 0; i < 2; i++ {
		a, c := ends[2*i], ends[2*i+1]
		src, dst := a.reg(size, allAccess), c.reg(size, allAccess)
		a.post(verbs.SendWR{WRID: 1, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
			SG: sge(src, 0, size), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	}
	waitCompletions(t, ends[0], 1)
	waitCompletions(t, ends[2], 1)
	got := 2 * size / time.Since(start).Seconds()
	t.Logf("two ports on one %.0f MB/s link moved %.1f MB/s together", rate/1e6, got/1e6)
	// The bucket lets a burst through on top of the rate.
	if max := rate*1.1 + burstOf(rate)/time.Since(start).Seconds(); got > max {
		t.Fatalf("two ports on one %.0f MB/s link moved %.1f MB/s together", rate/1e6, got/1e6)
	}
}

// The link file's name is shared by design and so can be planted: a link
// there is not followed (its target keeps its bytes), and a file open to
// others is refused (issue 30 item 1).
func TestAPlantedLinkFileIsRefused(t *testing.T) {
	name := linkName(t)
	path := linkPath(name)
	victim := t.TempDir() + "/root-only"
	os.WriteFile(victim, []byte("secret"), 0o600)
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	_, err := openSharedBucket(name, 1e9)
	os.Remove(path)
	if err == nil {
		t.Fatal("attached through a symbolic link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "secret" {
		t.Fatalf("the link's target now holds %q", b)
	}
	os.WriteFile(path, make([]byte, linkFileLen), 0o600)
	os.Chmod(path, 0o666)
	_, err = openSharedBucket(name, 1e9)
	os.Remove(path)
	if !errors.Is(err, jobfile.ErrNotOurs) {
		t.Fatalf("a link file open to others: %v", err)
	}
}
