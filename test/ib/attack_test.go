package ib

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtl/gobtl"
	"github.com/gobtl/gobtl/internal/layers"
)

// The attack of issue 15, and its relatives, on a running job: a process
// that can reach a softrc port but is not of the job connects, says HELLO
// and sends packets to the QP numbers it guesses — before the fix, thirty
// zero-length SENDs to QPs 0x42–0x5f failed every QP and the job. The
// attacker here is a goroutine of the test process; on the wire it is
// any other local process, and it finds the ports as one would, in
// /proc/net/tcp. The wire layout is written out by hand, as an outsider
// has to: a 40-byte header, op at 0, version at 3, dqpn at 4, psn at 12,
// length at 20.

const (
	atkHdr     = 40
	atkSend    = 2
	atkHello   = 1
	atkProof   = 13
	atkAddr    = 18 // GID, LID: the HELLO of wire version 1
	atkHelloV2 = atkAddr + 16
	atkChal    = 16 + 32
)

func atkHeader(op, version uint8, dqpn, psn, length uint32) []byte {
	b := make([]byte, atkHdr)
	b[0], b[3] = op, version
	binary.LittleEndian.PutUint32(b[4:], dqpn)
	binary.LittleEndian.PutUint32(b[8:], 0x77)
	binary.LittleEndian.PutUint32(b[12:], psn)
	binary.LittleEndian.PutUint32(b[20:], length)
	return b
}

// hello is a HELLO naming 127.0.0.1:port with a payload of size bytes.
func atkHelloPacket(version uint8, size int) []byte {
	p := make([]byte, size)
	copy(p, net.ParseIP("127.0.0.1").To16())
	binary.LittleEndian.PutUint16(p[16:], 4242)
	rand.Read(p[atkAddr:])
	return append(atkHeader(atkHello, version, 0, 0, uint32(size)), p...)
}

// sends is the thirty zero-length SENDs, with a made-up PSN, to
// QPs 0x42–0x5f (where the sequential numbers of the old device were).
func atkSends(version uint8) []byte {
	var b []byte
	for qpn := uint32(0x42); qpn < 0x42+30; qpn++ {
		b = append(b, atkHeader(atkSend, version, qpn, 1000+qpn, 0)...)
	}
	return b
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// attacks are what an outsider tries on one connection each.
var attacks = []struct {
	name string
	run  func(c net.Conn) error
}{
	{"hello then thirty sends (wire v1, the issue's)", func(c net.Conn) error {
		_, err := c.Write(append(atkHelloPacket(1, atkAddr), atkSends(1)...))
		return err
	}},
	{"hello then thirty sends (wire v2)", func(c net.Conn) error {
		_, err := c.Write(append(atkHelloPacket(2, atkHelloV2), atkSends(2)...))
		return err
	}},
	{"sends before any hello", func(c net.Conn) error {
		_, err := c.Write(append(atkSends(1), atkSends(2)...))
		return err
	}},
	{"garbage", func(c net.Conn) error { _, err := c.Write(random(4096)); return err }},
	{"oversized lengths", func(c net.Conn) error {
		b := append(atkHelloPacket(2, atkHelloV2), atkHeader(atkSend, 2, 0x42, 0, 0x7fffffff)...)
		b = append(b, atkHeader(atkSend, 2, 0x43, 0, 0xffffffff)...)
		_, err := c.Write(append(b, random(1000)...))
		return err
	}},
	{"oversized hello", func(c net.Conn) error {
		_, err := c.Write(append(atkHeader(atkHello, 2, 0, 0, 1<<30), random(8192)...))
		return err
	}},
	{"foreign hello: a proof under another key", func(c net.Conn) error {
		if _, err := c.Write(atkHelloPacket(2, atkHelloV2)); err != nil {
			return err
		}
		// Read the challenge (where there is one) and answer it with a
		// proof the outsider cannot make, then send anyway.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.ReadFull(c, make([]byte, atkHdr+atkChal))
		b := append(atkHeader(atkProof, 2, 0, 0, 32), random(32)...)
		_, err := c.Write(append(b, atkSends(2)...))
		return err
	}},
	{"connect and say nothing", func(c net.Conn) error { return nil }},
}

// ownListeners are the TCP ports this process listens on, from
// /proc/net/tcp{,6} and the sockets among its descriptors.
func ownListeners(t *testing.T) map[int]bool {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] {
				continue
			}
			i := strings.LastIndexByte(fs[1], ':')
			if p, err := strconv.ParseInt(fs[1][i+1:], 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
		fh.Close()
	}
	return ports
}

// TestOutsidersCannotTouchARunningJob runs a job over softrc that moves
// and checks messages of every size without a pause, attacks every port
// it opened in every way above, and wants the job to go on untouched:
// every message arrives intact and every attacking link is rejected.
func TestOutsidersCannotTouchARunningJob(t *testing.T) {
	a := &attacker{t: t, before: ownListeners(t), connected: make(chan struct{}), done: make(chan struct{})}
	go a.attack()
	var rounds atomic.Int64
	err := gobtl.RunLocal(context.Background(), 2, gobtl.Options{ConfigFiles: []string{"../../conf/examples/ib.hcl"}}, func(c *gobtl.Comm) error {
		return underAttack(c, a, &rounds)
	})
	<-a.done
	if err != nil {
		t.Fatal(err)
	}
	if a.conns.Load() == 0 {
		t.Fatal("the attacker found no port to attack")
	}
	t.Logf("%d attacking connections, %d rounds of %d messages each checked", a.conns.Load(), rounds.Load(), len(sizes))
}

// attacker attacks, in every way of attacks, every port this process
// listens on that it did not before the job, once the job is connected.
type attacker struct {
	t         *testing.T
	before    map[int]bool  // the ports listened on before the job
	connected chan struct{} // closed once the job has connected
	once      sync.Once
	done      chan struct{} // closed when the attack is over
	conns     atomic.Int64  // the attacking connections made
}

// jobConnected starts the attack.
func (a *attacker) jobConnected() { a.once.Do(func() { close(a.connected) }) }

// attack waits (a minute at most) for the job to connect, then makes
// every attack on every new port.
func (a *attacker) attack() {
	defer close(a.done)
	select {
	case <-a.connected:
	case <-time.After(time.Minute):
		return
	}
	var ports []int
	for p := range ownListeners(a.t) {
		if !a.before[p] {
			ports = append(ports, p)
		}
	}
	a.t.Logf("attacking ports %v", ports)
	var quiet []net.Conn // left open until the end: links that never prove themselves
	for _, p := range ports {
		for _, at := range attacks {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), 2*time.Second)
			if err != nil {
				a.t.Errorf("dial port %d: %v", p, err)
				continue
			}
			a.conns.Add(1)
			if err := at.run(c); err != nil {
				a.t.Logf("port %d, %s: %v (the port may already have closed the connection)", p, at.name, err)
			}
			if at.name == "connect and say nothing" {
				quiet = append(quiet, c)
				continue
			}
			c.Close()
		}
	}
	// Let the ranks read what came before the job goes on.
	time.Sleep(200 * time.Millisecond)
	for _, c := range quiet {
		c.Close()
	}
}

// underAttack is one rank of the job: rounds of checked messages of every
// size before, during and after the attack. Both ranks move on together:
// rank 0 says, every round, which stage the job is in (0 attack under
// way, 1 waiting for the rejections to show, 2 done); the job is done
// when every rank has rejected every attacking link.
func underAttack(c *gobtl.Comm, a *attacker, rounds *atomic.Int64) error {
	mine := 0
	round := func() error {
		mine++
		if c.Rank() == 0 {
			rounds.Add(1)
		}
		return exchange(layers.PML(c), sizes, mine%2 == 0)
	}
	if err := round(); err != nil {
		return err
	}
	a.jobConnected()
	rejected := c.Metrics().Gauge("ib.softrc0.links_rejected")
	want := int64(len(attacks) - 1) // the quiet one may still be open
	deadline := time.Now().Add(60 * time.Second)
	stage := []byte{0}
	for stage[0] != 2 {
		if c.Rank() == 0 {
			select {
			case <-a.done:
				stage[0] = 1
			default:
			}
		}
		if err := c.Bcast(stage, 0); err != nil {
			return err
		}
		if err := round(); err != nil {
			return fmt.Errorf("rank %d, round %d, stage %d: %w", c.Rank(), rounds.Load(), stage[0], err)
		}
		// Every rank must have rejected every attacking link.
		seen := stage[0] == 1 && rejected.Load() >= want
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d: after 60s, %d links rejected, want %d", c.Rank(), rejected.Load(), want)
		}
		if err := nextStage(c, stage, seen); err != nil {
			return err
		}
	}
	for range 3 {
		if err := round(); err != nil {
			return fmt.Errorf("after the attack: %w", err)
		}
	}
	return c.Barrier()
}

// nextStage tells every rank whether this one has seen its rejections,
// and rank 0 moves stage to 2 (done) once all have.
func nextStage(c *gobtl.Comm, stage []byte, rejected bool) error {
	done := []byte{0}
	if rejected {
		done[0] = 1
	}
	all := make([]byte, c.Size())
	if err := c.Alltoall(append(done, done...)[:c.Size()], all, 1); err != nil {
		return err
	}
	if c.Rank() == 0 && stage[0] == 1 && all[0] == 1 && all[1] == 1 {
		stage[0] = 2
	}
	return c.Bcast(stage, 0)
}
