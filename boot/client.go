package boot

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gobtl/gobtl/core"
)

// Client is a core.Bootstrap served by the launcher over a unix socket.
// It is safe for concurrent use; Fence calls are serialized.
type Client struct {
	rank, size int
	job        string

	mu      sync.Mutex
	conn    net.Conn
	enc     *json.Encoder
	dec     *json.Decoder
	pending map[string][]byte   // put since the last fence
	kv      []map[string][]byte // per rank, everything fenced so far
	broken  error               // set when the session cannot continue
}

var (
	_ core.Bootstrap = (*Client)(nil)
	_ core.Locality  = (*Client)(nil)
	_ core.Aborter   = (*Client)(nil)
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
		dec:     json.NewDecoder(bufio.NewReader(conn)),
		pending: map[string][]byte{},
		kv:      make([]map[string][]byte, size),
	}
	for i := range c.kv {
		c.kv[i] = map[string][]byte{}
	}
	rep, err := c.roundTrip(ctx, &Request{Op: OpHello, Rank: rank, Job: job})
	if err != nil {
		conn.Close()
		return nil, err
	}
	if rep.Size != size {
		conn.Close()
		return nil, fmt.Errorf("boot: rank %d: launcher says the job has %d ranks, environment says %d", rank, rep.Size, size)
	}
	return c, nil
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

// Close ends the session. Fences after Close fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = fmt.Errorf("boot: rank %d: %w", c.rank, core.ErrClosed)
	}
	return c.conn.Close()
}

// roundTrip sends req and reads its reply; ctx bounds the wait. Any
// failure breaks the session. Called with c.mu held.
func (c *Client) roundTrip(ctx context.Context, req *Request) (*Reply, error) {
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()
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
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		return fail(err)
	}
	var rep Reply
	if err := c.dec.Decode(&rep); err != nil {
		return fail(err)
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
