package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtl/gobtl/boot"
)

// testServer serves a job of n ranks with a short hello timeout.
func testServer(t *testing.T, n int, helloTimeout time.Duration) (srv *Server, path, job string) {
	t.Helper()
	job = NewJobID()
	path = filepath.Join(t.TempDir(), "boot.sock")
	srv, err := newServer(path, n, job, helloTimeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, path, job
}

// rawConn is a connection that speaks the protocol by hand; its reads
// give up after a generous bound so that a server that never answers
// fails the test instead of hanging it.
func rawConn(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return c
}

// readReply reads one reply line.
func readReply(t *testing.T, c net.Conn) boot.Reply {
	t.Helper()
	br := bufio.NewReader(c)
	var rep boot.Reply
	if err := json.NewDecoder(br).Decode(&rep); err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return rep
}

// bothRanksExchange checks that the job is untouched: its ranks connect
// and fence as if nothing had happened.
func bothRanksExchange(t *testing.T, path, job string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 2)
	for r := range 2 {
		go func() {
			c, err := boot.Dial(ctx, path, r, 2, job)
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			c.Put("k", []byte{byte(r)})
			if err := c.Fence(ctx); err != nil {
				done <- err
				return
			}
			v, err := c.Get(ctx, 1-r, "k")
			if err == nil && (len(v) != 1 || v[0] != byte(1-r)) {
				err = errors.New("wrong value")
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("the job's own ranks: %v", err)
		}
	}
}

func TestTheServerHangsUpOnAConnectionThatNeverSaysHello(t *testing.T) {
	_, path, job := testServer(t, 2, 100*time.Millisecond)
	c := rawConn(t, path)
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("a silent connection: read = %v, want EOF (the server hangs up)", err)
	}
	bothRanksExchange(t, path, job)
}

func TestTheServerRefusesALineLongerThanMaxLine(t *testing.T) {
	_, path, job := testServer(t, 2, HelloTimeout)
	c := rawConn(t, path)
	go func() {
		// The server stops reading at the limit; the rest of the write
		// fails when it hangs up.
		// A JSON string that never ends: a decoder without a bound
		// buffers all of it.
		c.Write([]byte(`{"op":"hello","job":"` + strings.Repeat("x", 4*boot.MaxLine)))
	}()
	rep := readReply(t, c)
	if !strings.Contains(rep.Err, "longer than") {
		t.Fatalf("reply to an endless line: %+v", rep)
	}
	// A hang-up with our bytes unread is a reset; only a timeout means
	// the server kept the connection.
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the refusal: %v, want the server to hang up", err)
	}
	bothRanksExchange(t, path, job)
}

func TestAHelloForAnotherJobLearnsNothing(t *testing.T) {
	_, path, job := testServer(t, 2, HelloTimeout)
	c := rawConn(t, path)
	json.NewEncoder(c).Encode(&boot.Request{Op: boot.OpHello, Rank: 0, Job: "guess"})
	rep := readReply(t, c)
	if rep.Err == "" || strings.Contains(rep.Err, job) || rep.Size != 0 || rep.KV != nil {
		t.Fatalf("reply to a wrong job: %+v (the job is %s of 2 ranks)", rep, job)
	}
	// The same through the client: its error says the job is wrong and
	// nothing more.
	if _, err := boot.Dial(context.Background(), path, 0, 2, "guess"); err == nil || strings.Contains(err.Error(), job) {
		t.Fatalf("Dial with a wrong job: %v", err)
	}
	bothRanksExchange(t, path, job)
}

func TestAFenceLargerThanMaxLineFailsAtTheRank(t *testing.T) {
	_, path, job := testServer(t, 1, HelloTimeout)
	c, err := boot.Dial(context.Background(), path, 0, 1, job)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Put("big", make([]byte, boot.MaxLine))
	if err := c.Fence(context.Background()); !errors.Is(err, boot.ErrLineTooLong) {
		t.Fatalf("fence of %d bytes: %v, want ErrLineTooLong", boot.MaxLine, err)
	}
}

func TestTheBootDirectoryGoesAfterTheLastHello(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "boot.sock")
	os.Mkdir(filepath.Dir(path), 0o700)
	job := NewJobID()
	srv, err := newServer(path, 2, job, HelloTimeout, func() { os.RemoveAll(filepath.Dir(path)) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c0, err := boot.Dial(ctx, path, 0, 2, job)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the socket went before every rank said hello: %v", err)
	}
	c1, err := boot.Dial(ctx, path, 1, 2, job)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("boot directory after the last hello: %v, want it gone", err)
	}
	// The connected ranks do not need the name.
	done := make(chan error, 1)
	go func() { done <- c1.Fence(ctx) }()
	if err := c0.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A notice to a rank that has gone must not throw away what the rank
// sent before it went: an abort report written just before its exit is
// still unread when a peer's lost notice finds its socket closed (the
// launcher reported "exited with status 1" instead of the abort in 1 of
// about 40 one-rank jobs on a loaded host).
func TestASendToAGoneRankKeepsWhatItSent(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	launcher, rank := os.NewFile(uintptr(fds[0]), "launcher"), os.NewFile(uintptr(fds[1]), "rank")
	conn, err := net.FileConn(launcher)
	launcher.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := rank.WriteString(`{"op":"abort","msg":"gives up"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	rank.Close() // the rank exits
	c := &serverConn{conn: conn, rank: 0, enc: json.NewEncoder(conn)}
	c.send(&Reply{Op: boot.OpLost, Rank: 1, Err: "rank 1 exited"})
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := boot.ReadLine(bufio.NewReader(conn), boot.MaxLine)
	if err != nil {
		t.Fatalf("the rank's report is lost: %v", err)
	}
	if req, err := boot.DecodeRequest(line); err != nil || req.Op != boot.OpAbort {
		t.Fatalf("read %q: %+v, %v", line, req, err)
	}
}
