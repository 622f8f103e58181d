package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtl/gobtl/core"
)

// Environment variables through which an engine hands a rank its PMI
// server (Slurm's mpi/pmi2 plugin, MPICH's hydra).
const (
	EnvFD    = "PMI_FD"    // an inherited, connected socket
	EnvPort  = "PMI_PORT"  // host:port to connect to, when there is no PMI_FD
	EnvRank  = "PMI_RANK"  // this rank
	EnvSize  = "PMI_SIZE"  // the job's size
	EnvID    = "PMI_ID"    // the rank's PMI id, if it differs from PMI_RANK
	EnvJobID = "PMI_JOBID" // Slurm's job id, which its fullinit wants back
	// EnvVersion is gobtl's own: "1" or "2" forces that protocol instead
	// of PMI-2 when the engine agrees, else PMI-1.
	EnvVersion = "GOBTL_PMI_VERSION"
)

// MappingKey is the job attribute in which Slurm and hydra describe which
// node each rank runs on.
const MappingKey = "PMI_process_mapping"

// Env is what the engine tells a rank in its environment.
type Env struct {
	FD    int    // PMI_FD, or -1
	Port  string // PMI_PORT when FD is -1
	Rank  int    // PMI_RANK
	Size  int    // PMI_SIZE
	ID    int    // PMI_ID, else Rank
	JobID string // PMI_JOBID, may be empty
	// Version is the protocol to speak: 2 or 1, or 0 for 2 when the
	// engine agrees, else 1.
	Version int
}

// Present reports whether getenv names a PMI server: PMI_FD or PMI_PORT,
// with PMI_RANK and PMI_SIZE.
func Present(getenv func(string) string) bool {
	return (getenv(EnvFD) != "" || getenv(EnvPort) != "") && getenv(EnvRank) != "" && getenv(EnvSize) != ""
}

// ParseEnv reads an Env from getenv (os.Getenv).
func ParseEnv(getenv func(string) string) (Env, error) {
	num := func(name string, min int) (int, error) {
		s := getenv(name)
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < min {
			return 0, fmt.Errorf("pmi: %s=%q is not an integer of at least %d", name, s, min)
		}
		return n, nil
	}
	e := Env{FD: -1, Port: getenv(EnvPort), JobID: getenv(EnvJobID)}
	var err error
	if getenv(EnvFD) != "" {
		if e.FD, err = num(EnvFD, 0); err != nil {
			return e, err
		}
	} else if e.Port == "" {
		return e, fmt.Errorf("pmi: neither %s nor %s is set", EnvFD, EnvPort)
	}
	if e.Rank, err = num(EnvRank, 0); err != nil {
		return e, err
	}
	if e.Size, err = num(EnvSize, 1); err != nil {
		return e, err
	}
	if e.Rank >= e.Size {
		return e, fmt.Errorf("pmi: %s=%d is not below %s=%d", EnvRank, e.Rank, EnvSize, e.Size)
	}
	switch v := getenv(EnvVersion); v {
	case "":
	case "1", "2":
		e.Version = int(v[0] - '0')
	default:
		return e, fmt.Errorf("pmi: %s=%q is neither 1 nor 2", EnvVersion, v)
	}
	e.ID = e.Rank
	if getenv(EnvID) != "" {
		if e.ID, err = num(EnvID, 0); err != nil {
			return e, err
		}
	}
	return e, nil
}

// FromEnv connects to the PMI server the environment names and runs the
// handshake.
func FromEnv(ctx context.Context) (*Client, error) {
	env, err := ParseEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	if env.FD >= 0 {
		// The engine's socket has no close-on-exec flag; a dup of it does,
		// so that processes this rank starts (plugins) never hold it. The
		// dup is also non-blocking, which gives it deadlines.
		f := os.NewFile(uintptr(env.FD), EnvFD)
		if f == nil {
			return nil, fmt.Errorf("pmi: %s=%d is not open", EnvFD, env.FD)
		}
		conn, err = net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("pmi: %s=%d: %w", EnvFD, env.FD, err)
		}
	} else {
		var d net.Dialer
		if conn, err = d.DialContext(ctx, "tcp", env.Port); err != nil {
			return nil, fmt.Errorf("pmi: connect to %s=%s: %w", EnvPort, env.Port, err)
		}
	}
	c, err := Connect(ctx, conn, env)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Client is a core.Bootstrap over PMI-2 or PMI-1. It also knows the job's
// locality (core.Locality), can end the job through the engine
// (core.Aborter) and tells the engine when the rank ends cleanly
// (core.Finalizer). It is safe for concurrent use; calls to the server
// are serialized.
type Client struct {
	env    Env
	ver    int
	job    string // PMI-2 jobid or PMI-1 kvsname
	maxVal int    // largest value the server takes
	nodes  core.NodeMap

	mu      sync.Mutex
	conn    net.Conn
	r       *bufio.Reader
	wbuf    []byte
	epoch   int                 // fences completed
	pending []put               // put since the last fence
	kv      []map[string][]byte // per rank, what it published (this rank: what it put)
	read    []int               // per rank, the epochs of its blobs read so far
	broken  error               // set when the session cannot go on
	done    bool                // finalized or closed
}

var (
	_ core.Bootstrap = (*Client)(nil)
	_ core.Locality  = (*Client)(nil)
	_ core.Aborter   = (*Client)(nil)
	_ core.Finalizer = (*Client)(nil)
)

// Connect runs the PMI handshake over conn, a connection to the rank's
// PMI server, and learns the job's locality. The Client owns conn.
func Connect(ctx context.Context, conn net.Conn, env Env) (*Client, error) {
	if env.Size < 1 || env.Rank < 0 || env.Rank >= env.Size {
		return nil, fmt.Errorf("pmi: rank %d of %d is out of range", env.Rank, env.Size)
	}
	c := &Client{env: env, conn: conn, r: bufio.NewReader(conn),
		kv: make([]map[string][]byte, env.Size), read: make([]int, env.Size)}
	for i := range c.kv {
		c.kv[i] = map[string][]byte{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.handshake(ctx); err != nil {
		return nil, err
	}
	if err := c.locate(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// handshake agrees on a version, then learns the job's id and the
// server's limits.
func (c *Client) handshake(ctx context.Context) error {
	init := func(ver int) (bool, error) {
		sub := map[int]string{1: "1", 2: "0"}[ver]
		rep, err := c.call(ctx, 1, msg{"init", []arg{{"pmi_version", strconv.Itoa(ver)}, {"pmi_subversion", sub}}}, "response_to_init", true)
		if err != nil {
			return false, err
		}
		got, _ := rep.get("pmi_version")
		rc, _ := rep.rc()
		return rc == 0 && strings.TrimSpace(got) == strconv.Itoa(ver), nil
	}
	if c.env.Version != 1 {
		ok, err := init(2)
		if err != nil {
			return err
		}
		if ok {
			c.ver = 2
			return c.init2(ctx)
		}
		if c.env.Version == 2 {
			return errors.New("pmi: the engine does not speak PMI-2")
		}
	}
	if ok, err := init(1); err != nil {
		return err
	} else if !ok {
		return errors.New("pmi: the engine speaks neither PMI-2 nor PMI-1.1")
	}
	c.ver = 1
	return c.init1(ctx)
}

func (c *Client) init2(ctx context.Context) error {
	job := c.env.JobID
	if job == "" {
		job = "0" // Slurm insists on the key; hydra ignores it
	}
	rep, err := c.call(ctx, 2, msg{"fullinit", []arg{{"pmijobid", job}, {"pmirank", strconv.Itoa(c.env.ID)}, {"threaded", "FALSE"}}}, "fullinit-response", false)
	if err != nil {
		return err
	}
	if err := c.checkRankSize(rep); err != nil {
		return err
	}
	if rep, err = c.call(ctx, 2, msg{"job-getid", nil}, "job-getid-response", false); err != nil {
		return err
	}
	id, ok := rep.get("jobid")
	if !ok || id == "" {
		return errors.New("pmi: job-getid-response has no jobid")
	}
	c.job = id
	// Slurm's and hydra's PMI2_MAX_VALLEN.
	c.maxVal = 1024
	return nil
}

func (c *Client) init1(ctx context.Context) error {
	rep, err := c.call(ctx, 1, msg{"get_maxes", nil}, "maxes", false)
	if err != nil {
		return err
	}
	vallen, err := rep.int("vallen_max")
	if err != nil {
		return fmt.Errorf("pmi: %w", err)
	}
	if rep, err = c.call(ctx, 1, msg{"get_my_kvsname", nil}, "my_kvsname", false); err != nil {
		return err
	}
	name, ok := rep.get("kvsname")
	if !ok || name == "" {
		return errors.New("pmi: my_kvsname has no kvsname")
	}
	c.job = name
	// PMI-1 servers read lines of PMIU_MAXLINE (1024) bytes: the value of
	// a put shares the line with the command, the kvs name and the key.
	line := 1024 - len("cmd=put kvsname= key= value=\n") - len(name) - 32
	c.maxVal = min(vallen, line)
	if c.maxVal < 64 {
		return fmt.Errorf("pmi: values of %d bytes are too short to carry anything", c.maxVal)
	}
	return nil
}

// checkRankSize makes sure the engine and the environment agree.
func (c *Client) checkRankSize(rep msg) error {
	rank, err := rep.int("rank")
	if err != nil {
		return fmt.Errorf("pmi: %w", err)
	}
	size, err := rep.int("size")
	if err != nil {
		return fmt.Errorf("pmi: %w", err)
	}
	if rank != c.env.Rank || size != c.env.Size {
		return fmt.Errorf("pmi: the engine says rank %d of %d, the environment rank %d of %d", rank, size, c.env.Rank, c.env.Size)
	}
	return nil
}

// locate learns which node each rank runs on: PMI_process_mapping, or
// else an exchange of host names.
func (c *Client) locate(ctx context.Context) error {
	if s, ok, err := c.jobAttr(ctx, MappingKey); err != nil {
		return err
	} else if ok {
		m, err := parseMapping(s, c.env.Size)
		if err == nil {
			c.nodes = m
			return nil
		}
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("pmi: hostname: %w", err)
	}
	const key = "gobtl.pmi.host"
	c.pending = append(c.pending, put{key, []byte(host)})
	c.kv[c.env.Rank][key] = []byte(host)
	if err := c.fence(ctx); err != nil {
		return err
	}
	hosts := make([]string, c.env.Size)
	for r := range hosts {
		v, err := c.get(ctx, r, key)
		if err != nil {
			return err
		}
		hosts[r] = string(v)
	}
	c.nodes = core.NewNodeMap(hosts)
	return nil
}

// jobAttr reads a job attribute the engine offers (not a rank's key).
func (c *Client) jobAttr(ctx context.Context, key string) (string, bool, error) {
	var rep msg
	var err error
	if c.ver == 2 {
		rep, err = c.call(ctx, 2, msg{"info-getjobattr", []arg{{"key", key}}}, "info-getjobattr-response", true)
	} else {
		rep, err = c.call(ctx, 1, msg{"get", []arg{{"kvsname", c.job}, {"key", key}}}, "get_result", true)
	}
	if err != nil {
		return "", false, err
	}
	if rc, _ := rep.rc(); rc != 0 {
		return "", false, nil
	}
	if f, ok := rep.get("found"); ok && !strings.EqualFold(f, "TRUE") {
		return "", false, nil
	}
	v, ok := rep.get("value")
	return v, ok, nil
}

// Rank is this process's rank.
func (c *Client) Rank() int { return c.env.Rank }

// Size is the number of ranks.
func (c *Client) Size() int { return c.env.Size }

// JobID is the engine's name of the job (Slurm's job id, hydra's kvs
// name).
func (c *Client) JobID() string { return c.job }

// Version is the PMI protocol spoken: 2 or 1.
func (c *Client) Version() int { return c.ver }

// Node is the node rank runs on.
func (c *Client) Node(rank int) int { return c.nodes.Node(rank) }

// Nodes is the number of nodes the job spans.
func (c *Client) Nodes() int { return c.nodes.Nodes() }

// Put buffers value under key; the next Fence publishes it. PMI's
// key-value space is write-once: putting a key again with another value
// after it was fenced is an error.
func (c *Client) Put(key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	v := append([]byte(nil), value...)
	c.pending = append(c.pending, put{key, v})
	c.kv[c.env.Rank][key] = v
	return nil
}

// Fence publishes this rank's puts and returns once every rank has
// fenced. If ctx ends first the session is broken.
func (c *Client) Fence(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	return c.fence(ctx)
}

func (c *Client) fence(ctx context.Context) error {
	e := c.epoch + 1
	for i, v := range chunkBlob(encodeBlob(c.pending), c.maxVal) {
		if err := c.putRaw(ctx, blobKey(c.env.Rank, e, i), v); err != nil {
			return err
		}
	}
	var err error
	if c.ver == 2 {
		_, err = c.call(ctx, 2, msg{"kvs-fence", nil}, "kvs-fence-response", false)
	} else {
		_, err = c.call(ctx, 1, msg{"barrier_in", nil}, "barrier_out", false)
	}
	if err != nil {
		return err
	}
	c.epoch, c.pending = e, nil
	c.read[c.env.Rank] = e
	return nil
}

func (c *Client) putRaw(ctx context.Context, key, value string) error {
	if c.ver == 2 {
		_, err := c.call(ctx, 2, msg{"kvs-put", []arg{{"key", key}, {"value", value}}}, "kvs-put-response", false)
		return err
	}
	_, err := c.call(ctx, 1, msg{"put", []arg{{"kvsname", c.job}, {"key", key}, {"value", value}}}, "put_result", false)
	return err
}

func (c *Client) getRaw(ctx context.Context, key string) (string, error) {
	var rep msg
	var err error
	if c.ver == 2 {
		rep, err = c.call(ctx, 2, msg{"kvs-get", []arg{{"key", key}}}, "kvs-get-response", false)
	} else {
		rep, err = c.call(ctx, 1, msg{"get", []arg{{"kvsname", c.job}, {"key", key}}}, "get_result", false)
	}
	if err != nil {
		return "", err
	}
	if f, ok := rep.get("found"); ok && !strings.EqualFold(f, "TRUE") {
		return "", c.breakf("%s: the engine has no %s", rep.cmd, key)
	}
	v, ok := rep.get("value")
	if !ok {
		return "", c.breakf("%s has no value for %s", rep.cmd, key)
	}
	return v, nil
}

// Get returns what rank published under key before the last Fence (for
// this rank, what it put). The first Get of a rank after a fence reads
// its blobs from the engine; later ones are local.
func (c *Client) Get(ctx context.Context, rank int, key string) ([]byte, error) {
	if rank < 0 || rank >= c.env.Size {
		return nil, fmt.Errorf("pmi: get %q: rank %d is out of range [0,%d)", key, rank, c.env.Size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return nil, err
	}
	return c.get(ctx, rank, key)
}

func (c *Client) get(ctx context.Context, rank int, key string) ([]byte, error) {
	for c.read[rank] < c.epoch {
		e := c.read[rank] + 1
		head, err := c.getRaw(ctx, blobKey(rank, e, 0))
		if err != nil {
			return nil, err
		}
		n, piece, err := chunkCount(head)
		if err != nil {
			return nil, c.breakf("rank %d's blob of epoch %d: %v", rank, e, err)
		}
		pieces := []string{piece}
		for i := 1; i < n; i++ {
			p, err := c.getRaw(ctx, blobKey(rank, e, i))
			if err != nil {
				return nil, err
			}
			pieces = append(pieces, p)
		}
		blob, err := joinChunks(pieces)
		if err == nil {
			err = decodeBlob(blob, c.kv[rank])
		}
		if err != nil {
			return nil, c.breakf("rank %d's blob of epoch %d: %v", rank, e, err)
		}
		c.read[rank] = e
	}
	v, ok := c.kv[rank][key]
	if !ok {
		return nil, fmt.Errorf("pmi: rank %d has not published %q (before the last fence)", rank, key)
	}
	return v, nil
}

// Abort asks the engine to end the whole job, reporting code; it does not
// wait for the engine to act. text goes to standard error, which the
// engine forwards; only a sanitized prefix of it travels (PMI values have
// no escapes).
func (c *Client) Abort(code int, text string) error {
	fmt.Fprintf(os.Stderr, "pmi: rank %d aborts the job (status %d): %s\n", c.env.Rank, code, text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return fmt.Errorf("pmi: abort: %w", core.ErrClosed)
	}
	m := msg{"abort", []arg{{"exitcode", strconv.Itoa(code)}}}
	if c.ver == 2 {
		// Slurm kills the step only for isworld=TRUE.
		m.args = append(m.args, arg{"isworld", "TRUE"})
	}
	if t := sanitize(text); t != "" {
		m.args = append(m.args, arg{"msg", t})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.send(ctx, c.ver, m)
}

// Finalize tells the engine that this rank ends cleanly and closes the
// connection. Call it only on success: an engine that sees a rank exit
// without finalizing stops the job.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	var err error
	if c.broken == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c.ver == 2 {
			_, err = c.call(ctx, 2, msg{"finalize", nil}, "finalize-response", false)
		} else {
			_, err = c.call(ctx, 1, msg{"finalize", nil}, "finalize_ack", false)
		}
	}
	c.done = true
	return errors.Join(err, c.conn.Close())
}

// Close drops the connection without finalizing (the error path).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	c.done = true
	return c.conn.Close()
}

func (c *Client) usable() error {
	if c.done {
		return fmt.Errorf("pmi: rank %d: %w", c.env.Rank, core.ErrClosed)
	}
	return c.broken
}

func (c *Client) breakf(format string, args ...any) error {
	c.broken = fmt.Errorf("pmi: rank %d: %s: %w", c.env.Rank, fmt.Sprintf(format, args...), errWire)
	return c.broken
}

// send writes m in the wire of version ver, within ctx.
func (c *Client) send(ctx context.Context, ver int, m msg) error {
	var err error
	if c.wbuf, err = appendMsg(c.wbuf[:0], m, ver); err != nil {
		return fmt.Errorf("pmi: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetWriteDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetWriteDeadline(dl)
	} else {
		c.conn.SetWriteDeadline(time.Time{})
	}
	_, err = c.conn.Write(c.wbuf)
	return err
}

// call sends m and reads the response, which must be want. With soft, a
// non-zero rc is returned in the response for the caller to judge;
// otherwise it is an error. Any failure to talk breaks the session.
func (c *Client) call(ctx context.Context, ver int, m msg, want string, soft bool) (msg, error) {
	fail := func(err error) (msg, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: %w", err, core.ErrPeerLost)
		}
		c.broken = fmt.Errorf("pmi: rank %d: %s: %w", c.env.Rank, m.cmd, err)
		return msg{}, c.broken
	}
	if err := c.send(ctx, ver, m); err != nil {
		return fail(err)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetReadDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetReadDeadline(dl)
	} else {
		c.conn.SetReadDeadline(time.Time{})
	}
	rep, err := readMsg(c.r, ver)
	if err != nil {
		return fail(err)
	}
	if rep.cmd != want {
		return fail(fmt.Errorf("answered %q, want %q: %w", rep.cmd, want, errWire))
	}
	if rc, why := rep.rc(); rc != 0 && !soft {
		return msg{}, fmt.Errorf("pmi: rank %d: %s failed: rc=%d: %s", c.env.Rank, m.cmd, rc, why)
	}
	return rep, nil
}

// sanitize keeps what every PMI parser passes through in a value.
func sanitize(s string) string {
	b := []byte(s)
	if len(b) > 200 {
		b = b[:200]
	}
	for i, x := range b {
		if !(x >= 'a' && x <= 'z' || x >= 'A' && x <= 'Z' || x >= '0' && x <= '9' || strings.IndexByte("_-.,:/()", x) >= 0) {
			b[i] = '_'
		}
	}
	return string(b)
}
