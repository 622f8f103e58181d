package boot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Client is a core.Bootstrap served by the launcher over a unix socket.
// It is safe for concurrent use; Fence calls are serialized. A goroutine
// of its own reads the session: the replies to its requests, and the
// launcher's notices of ranks that ended without finalizing
// (core.PeerWatcher), which come whenever a rank dies.
type Client struct {
	rank, size int
	job        string

	mu      sync.Mutex
	conn    net.Conn
	enc     *json.Encoder
	pending map[string][]byte   // put since the last fence
	kv      []map[string][]byte // per rank, everything fenced so far
	broken  error               // set when the session cannot continue
	closed  bool

	// replies carries the replies the reader read, to the request in
	// flight (one at a time, under mu); it is closed when the session
	// ends, readErr saying why.
	replies chan Reply
	readErr error
	done    chan struct{} // closed by Close: the reader stops

	lostMu sync.Mutex
	onLost func(rank int, err error)
	lost   []lostRank // notices that came before onLost
}

type lostRank struct {
	rank int
	err  error
}

var (
	_ core.Bootstrap   = (*Client)(nil)
	_ core.Locality    = (*Client)(nil)
	_ core.Aborter     = (*Client)(nil)
	_ core.Finalizer   = (*Client)(nil)
	_ core.PeerWatcher = (*Client)(nil)
)

// FromEnv returns the bootstrap of a process started by `gobtl run`. It
// reports ok=false, and no error, when the environment names no launcher,
// so that the caller can fall back to another bootstrap (a single-rank
// job). A malformed environment or an unreachable server is an error.
func FromEnv(ctx context.Context) (b *Client, ok bool, err error) {
	path := os.Getenv(EnvBoot)
	if path == "" {
		return nil, false, nil
	}
	rank, err := envInt(EnvRank)
	if err != nil {
		return nil, true, err
	}
	size, err := envInt(EnvSize)
	if err != nil {
		return nil, true, err
	}
	job := os.Getenv(EnvJobID)
	if job == "" {
		return nil, true, fmt.Errorf("boot: %s is set but %s is empty", EnvBoot, EnvJobID)
	}
	c, err := Dial(ctx, path, rank, size, job)
	return c, true, err
}

func envInt(name string) (int, error) {
	s := os.Getenv(name)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("boot: %s=%q is not a non-negative integer", name, s)
	}
	return n, nil
}

// Dial connects rank of a job of size ranks to the bootstrap server at
// path and checks that the server agrees on the job and its size.
func Dial(ctx context.Context, path string, rank, size int, job string) (*Client, error) {
	if size <= 0 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("boot: rank %d of %d is out of range", rank, size)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("boot: rank %d: connect to launcher: %w", rank, err)
	}
	c := &Client{
		rank: rank, size: size, job: job,
		conn:    conn,
		enc:     json.NewEncoder(conn),
		pending: map[string][]byte{},
		kv:      make([]map[string][]byte, size),
		replies: make(chan Reply, 1),
		done:    make(chan struct{}),
	}
	for i := range c.kv {
		c.kv[i] = map[string][]byte{}
	}
	go c.read(json.NewDecoder(bufio.NewReader(conn)))
	rep, err := c.roundTrip(ctx, &Request{Op: OpHello, Rank: rank, Job: job})
	if err != nil {
		c.Close()
		return nil, err
	}
	if rep.Size != size {
		c.Close()
		return nil, fmt.Errorf("boot: rank %d: launcher says the job has %d ranks, environment says %d", rank, rep.Size, size)
	}
	return c, nil
}

// read reads the session until it ends: replies go to the request in
// flight, notices of lost ranks to OnPeerLost's function.
func (c *Client) read(dec *json.Decoder) {
	defer close(c.replies)
	for {
		var rep Reply
		if err := dec.Decode(&rep); err != nil {
			c.readErr = err // read after replies is closed
			return
		}
		if rep.Op == OpLost {
			c.peerLost(rep)
			continue
		}
		// One request is in flight at a time and the slot is empty while
		// it waits; a reply nobody waits for (its request gave up on its
		// context, breaking the session) is dropped.
		select {
		case c.replies <- rep:
		case <-c.done:
			return
		default:
		}
	}
}

// peerLost delivers the launcher's notice that a rank ended without
// finalizing, or keeps it for OnPeerLost.
func (c *Client) peerLost(rep Reply) {
	if rep.Rank < 0 || rep.Rank >= c.size || rep.Rank == c.rank {
		return
	}
	err := fmt.Errorf("boot: the launcher reports %s: %w", rep.Err, core.ErrPeerLost)
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	if c.onLost == nil {
		c.lost = append(c.lost, lostRank{rep.Rank, err})
		return
	}
	c.onLost(rep.Rank, err)
}

// OnPeerLost installs f, called from the session's reader for every rank
// the launcher reports ended without finalizing (core.PeerWatcher); the
// notices that came before are delivered now. f must not call back into
// the Client.
func (c *Client) OnPeerLost(f func(rank int, err error)) {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	c.onLost = f
	for _, l := range c.lost {
		f(l.rank, l.err)
	}
	c.lost = nil
}

// Rank is this process's rank.
func (c *Client) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Client) Size() int { return c.size }

// JobID names the job.
func (c *Client) JobID() string { return c.job }

// Put buffers value under key; the next Fence publishes it.
func (c *Client) Put(key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	v := append([]byte(nil), value...)
	c.pending[key] = v
	c.kv[c.rank][key] = v
	return nil
}

// Fence publishes this rank's puts and returns when every rank has fenced,
// with their puts visible to Get. If ctx ends first the session is broken:
// the fence may have completed at the server without this rank seeing it.
func (c *Client) Fence(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	rep, err := c.roundTrip(ctx, &Request{Op: OpFence, Rank: c.rank, Puts: c.pending})
	if err != nil {
		return err
	}
	c.pending = map[string][]byte{}
	for r, kv := range rep.KV {
		if r < 0 || r >= c.size {
			c.broken = fmt.Errorf("boot: rank %d: fence reply names rank %d of %d", c.rank, r, c.size)
			return c.broken
		}
		for k, v := range kv {
			c.kv[r][k] = v
		}
	}
	return nil
}

// Get returns what rank published under key before the last Fence (or, for
// this rank, what it put).
func (c *Client) Get(ctx context.Context, rank int, key string) ([]byte, error) {
	if rank < 0 || rank >= c.size {
		return nil, fmt.Errorf("boot: get %q: rank %d is out of range [0,%d)", key, rank, c.size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.kv[rank][key]
	if !ok {
		return nil, fmt.Errorf("boot: rank %d has not published %q (before the last fence)", rank, key)
	}
	return v, nil
}

// Node is the node of rank: `gobtl run` starts every rank on its own host
// (core.Locality).
func (c *Client) Node(rank int) int {
	if rank < 0 || rank >= c.size {
		return -1
	}
	return 0
}

// Nodes is 1: the job runs on one host.
func (c *Client) Nodes() int { return 1 }

// Abort tells the launcher that this rank failed fatally; the launcher
// prints msg and stops the job (which then exits non-zero; code is not
// carried). It does not wait for an answer.
func (c *Client) Abort(code int, msg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	if len(msg) > maxAbortMsg {
		msg = msg[:maxAbortMsg] + "..."
	}
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	return c.enc.Encode(&Request{Op: OpAbort, Rank: c.rank, Msg: msg})
}

// maxAbortMsg keeps an abort report well inside MaxLine.
const maxAbortMsg = 64 << 10

// Finalize tells the launcher that this rank ends cleanly and ends the
// session (core.Finalizer): a rank that said hello and exits without it
// fails its job, however it exits. It returns once the launcher has
// recorded it.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	ctx, cancel := context.WithTimeout(context.Background(), finalizeTimeout)
	defer cancel()
	_, err := c.roundTrip(ctx, &Request{Op: OpFinalize, Rank: c.rank})
	c.closeLocked()
	return err
}

// finalizeTimeout bounds Finalize's wait for the launcher, which answers
// at once unless it is stopped (SIGSTOP) or gone.
const finalizeTimeout = 10 * time.Second

// Close ends the session without finalizing. Fences after Close fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Client) closeLocked() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.broken = fmt.Errorf("boot: rank %d: %w", c.rank, core.ErrClosed)
	close(c.done)
	return c.conn.Close()
}

// roundTrip sends req and waits for its reply; ctx bounds the wait. Any
// failure breaks the session. Called with c.mu held.
func (c *Client) roundTrip(ctx context.Context, req *Request) (*Reply, error) {
	fail := func(err error) (*Reply, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		c.broken = fmt.Errorf("boot: rank %d: %s: %w", c.rank, req.Op, err)
		return nil, c.broken
	}
	line, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if len(line)+1 > MaxLine {
		// The server would end the session; say why here instead.
		return fail(fmt.Errorf("request of %d bytes, the launcher takes at most %d: %w", len(line)+1, MaxLine, ErrLineTooLong))
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetWriteDeadline(time.Now()) })
	_, err = c.conn.Write(append(line, '\n'))
	stop()
	if err != nil {
		return fail(err)
	}
	var rep Reply
	select {
	case r, ok := <-c.replies:
		if !ok {
			err := c.readErr
			if err == nil {
				err = io.EOF
			}
			return fail(err)
		}
		rep = r
	case <-ctx.Done():
		return fail(errors.New("no reply"))
	}
	if rep.Err != "" {
		// The server fails a session when a rank died or left.
		return fail(fmt.Errorf("%s: %w", rep.Err, core.ErrPeerLost))
	}
	if rep.Op != req.Op {
		return fail(fmt.Errorf("reply to %q is %q", req.Op, rep.Op))
	}
	return &rep, nil
}
