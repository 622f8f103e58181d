//go:build pmix && cgo

package pmix

/*
#cgo pkg-config: pmix
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <pmix.h>

// The helpers keep pmix_value_t's unions and the PMIX_* macros on the C
// side; Go sees plain integers, strings and byte copies it must free.

static pmix_status_t gobtl_init(char *ns, uint32_t *rank) {
	pmix_proc_t me;
	pmix_status_t rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) return rc;
	memcpy(ns, me.nspace, PMIX_MAX_NSLEN + 1);
	*rank = me.rank;
	return PMIX_SUCCESS;
}

// gobtl_get looks key up for rank of ns (PMIX_RANK_WILDCARD: job-level).
// optional keeps the lookup local: job information the server gave at
// init, never a request to another node. timeout > 0 bounds it (seconds).
static pmix_status_t gobtl_get(const char *ns, uint32_t rank, const char *key, bool optional, int timeout, pmix_value_t **v) {
	pmix_proc_t p;
	pmix_info_t info[2];
	size_t n = 0;
	PMIX_PROC_LOAD(&p, ns, rank);
	if (optional) {
		PMIX_INFO_LOAD(&info[n], PMIX_OPTIONAL, &optional, PMIX_BOOL);
		n++;
	}
	if (timeout > 0) {
		PMIX_INFO_LOAD(&info[n], PMIX_TIMEOUT, &timeout, PMIX_INT);
		n++;
	}
	pmix_status_t rc = PMIx_Get(&p, key, n ? info : NULL, n, v);
	for (size_t i = 0; i < n; i++) PMIX_INFO_DESTRUCT(&info[i]);
	return rc;
}

static pmix_status_t gobtl_get_uint(const char *ns, uint32_t rank, const char *key, bool optional, uint64_t *out) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = gobtl_get(ns, rank, key, optional, 0, &v);
	if (rc != PMIX_SUCCESS) return rc;
	switch (v->type) {
	case PMIX_UINT32: *out = v->data.uint32; break;
	case PMIX_UINT16: *out = v->data.uint16; break;
	case PMIX_UINT64: *out = v->data.uint64; break;
	case PMIX_UINT:   *out = v->data.uint; break;
	case PMIX_INT:    *out = (uint64_t)v->data.integer; break;
	case PMIX_PROC_RANK: *out = v->data.rank; break;
	default: rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

static pmix_status_t gobtl_get_string(const char *ns, uint32_t rank, const char *key, bool optional, char **out) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = gobtl_get(ns, rank, key, optional, 0, &v);
	if (rc != PMIX_SUCCESS) return rc;
	if (v->type == PMIX_STRING && v->data.string != NULL) {
		*out = strdup(v->data.string);
	} else {
		rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

static pmix_status_t gobtl_get_bytes(const char *ns, uint32_t rank, const char *key, bool optional, int timeout, char **out, size_t *len) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = gobtl_get(ns, rank, key, optional, timeout, &v);
	if (rc != PMIX_SUCCESS) return rc;
	if (v->type == PMIX_BYTE_OBJECT) {
		*len = v->data.bo.size;
		*out = malloc(*len ? *len : 1);
		if (*len) memcpy(*out, v->data.bo.bytes, *len);
	} else {
		rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

// gobtl_put publishes a copy of data (PMIx_Put copies the value).
static pmix_status_t gobtl_put(const char *key, char *data, size_t len) {
	pmix_value_t v;
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = data;
	v.data.bo.size = len;
	return PMIx_Put(PMIX_GLOBAL, key, &v);
}

static pmix_status_t gobtl_fence(const char *ns, int timeout) {
	pmix_status_t rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS) return rc;
	pmix_proc_t all;
	pmix_info_t info[2];
	bool collect = true;
	size_t n = 1;
	PMIX_PROC_LOAD(&all, ns, PMIX_RANK_WILDCARD);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	if (timeout > 0) {
		PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
		n++;
	}
	rc = PMIx_Fence(&all, 1, info, n);
	for (size_t i = 0; i < n; i++) PMIX_INFO_DESTRUCT(&info[i]);
	return rc;
}

// gobtl_evhdlr takes the engine's notice that a process ended (events.go
// registers it) to Go: the process is the event's affected one, else its
// source. Other handlers run after it.
extern void gobtlProcEnded(char *nspace, uint32_t rank, int status);

static void gobtl_evhdlr(size_t id, pmix_status_t status, const pmix_proc_t *source,
		pmix_info_t info[], size_t ninfo, pmix_info_t *results, size_t nresults,
		pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata) {
	const pmix_proc_t *p = source;
	for (size_t i = 0; i < ninfo; i++) {
		if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC) {
			p = info[i].value.data.proc;
		}
	}
	if (p != NULL) {
		gobtlProcEnded((char *)p->nspace, p->rank, status);
	}
	if (cbfunc != NULL) {
		cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
	}
}

// gobtl_watch registers gobtl_evhdlr for the events of a process that
// ended: PMIx's own, and those of engines built on older releases.
static pmix_status_t gobtl_watch(void) {
	pmix_status_t codes[] = {PMIX_PROC_TERMINATED, PMIX_ERR_PROC_TERM_WO_SYNC, PMIX_EVENT_PROC_TERMINATED,
		PMIX_ERR_PROC_ABORTED, PMIX_ERR_PROC_ABORTING, PMIX_ERR_PROC_ABORTED_BY_SIG};
	pmix_status_t rc = PMIx_Register_event_handler(codes, sizeof(codes) / sizeof(codes[0]), NULL, 0, gobtl_evhdlr, NULL, NULL);
	return rc < 0 ? rc : PMIX_SUCCESS;
}

static pmix_status_t gobtl_abort(int status, const char *msg) { return PMIx_Abort(status, msg, NULL, 0); }
static pmix_status_t gobtl_finalize(void) { return PMIx_Finalize(NULL, 0); }
static uint32_t gobtl_wildcard(void) { return PMIX_RANK_WILDCARD; }
static int gobtl_nslen(void) { return PMIX_MAX_NSLEN + 1; }
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gobtl/gobtl/core"
)

// Available reports whether this build can join a PMIx job.
const Available = true

// Client is a core.Bootstrap over the OpenPMIx client library. It also
// gives the job's locality (core.Locality), ends the job through the
// engine (core.Aborter) and finalizes the library on a clean end
// (core.Finalizer). PMIx_Init happens once per process: a second Client
// in the same process shares the library's state.
type Client struct {
	ns    string
	cns   *C.char // ns for every call
	rank  int
	size  int
	nodes core.NodeMap

	mu     sync.Mutex
	own    map[string][]byte // what this rank put, for its own Get
	broken error
	done   bool

	// lost holds the engine's notices of ranks that ended (events.go).
	lost lostRanks
}

var (
	_ core.Bootstrap   = (*Client)(nil)
	_ core.Locality    = (*Client)(nil)
	_ core.Aborter     = (*Client)(nil)
	_ core.Finalizer   = (*Client)(nil)
	_ core.PeerWatcher = (*Client)(nil)
)

// keyPrefix keeps gobtl's keys out of PMIx's reserved "pmix" names.
const keyPrefix = "gobtl."

func status(rc C.pmix_status_t) error {
	if rc == C.PMIX_SUCCESS {
		return nil
	}
	return fmt.Errorf("%s (%d)", C.GoString(C.PMIx_Error_string(rc)), int(rc))
}

// FromEnv initializes the PMIx client of a rank its engine started, and
// returns it as a *Client.
func FromEnv(ctx context.Context) (core.Bootstrap, error) {
	c, err := Init(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Init initializes the library and learns the job: its size, this rank
// and where every rank runs.
func Init(context.Context) (*Client, error) {
	buf := (*C.char)(C.malloc(C.size_t(C.gobtl_nslen())))
	defer C.free(unsafe.Pointer(buf))
	var rank C.uint32_t
	if err := status(C.gobtl_init(buf, &rank)); err != nil {
		return nil, fmt.Errorf("pmix: PMIx_Init: %w", err)
	}
	c := &Client{ns: C.GoString(buf), rank: int(rank), own: map[string][]byte{}}
	c.cns = C.CString(c.ns)
	size, err := c.uint(C.gobtl_wildcard(), C.PMIX_JOB_SIZE, false)
	if err != nil {
		C.gobtl_finalize()
		return nil, fmt.Errorf("pmix: job size: %w", err)
	}
	c.size = int(size)
	if c.rank >= c.size {
		C.gobtl_finalize()
		return nil, fmt.Errorf("pmix: rank %d of a job of %d", c.rank, c.size)
	}
	if c.nodes, err = c.locate(); err != nil {
		C.gobtl_finalize()
		return nil, err
	}
	c.watch()
	return c, nil
}

// watch registers the handler of the engine's notices that a process
// ended (events.go) for this client; an engine without events leaves the
// transports to notice.
func (c *Client) watch() {
	watching.mu.Lock()
	watching.c = c
	watching.mu.Unlock()
	C.gobtl_watch()
}

func (c *Client) uint(rank C.uint32_t, key string, optional bool) (uint64, error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var v C.uint64_t
	if err := status(C.gobtl_get_uint(c.cns, rank, ck, C.bool(optional), &v)); err != nil {
		return 0, err
	}
	return uint64(v), nil
}

func (c *Client) string(rank C.uint32_t, key string, optional bool) (string, error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var s *C.char
	if err := status(C.gobtl_get_string(c.cns, rank, ck, C.bool(optional), &s)); err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s), nil
}

// locate learns every rank's node from what the engine registered.
func (c *Client) locate() (core.NodeMap, error) {
	ids := make([]uint64, c.size)
	ok := true
	for r := range ids {
		id, err := c.uint(C.uint32_t(r), C.PMIX_NODEID, true)
		if err != nil {
			ok = false
			break
		}
		ids[r] = id
	}
	if ok {
		return core.NewNodeMap(ids), nil
	}
	hosts := make([]string, c.size)
	ok = true
	for r := range hosts {
		h, err := c.string(C.uint32_t(r), C.PMIX_HOSTNAME, true)
		if err != nil {
			ok = false
			break
		}
		hosts[r] = h
	}
	if ok {
		return core.NewNodeMap(hosts), nil
	}
	peers, err := c.string(C.gobtl_wildcard(), C.PMIX_LOCAL_PEERS, true)
	if err != nil {
		return nil, fmt.Errorf("pmix: the engine gives neither %s, %s nor %s: %w", C.PMIX_NODEID, C.PMIX_HOSTNAME, C.PMIX_LOCAL_PEERS, err)
	}
	// Ranks elsewhere each count as a node: only "shares this node" is known.
	labels := make([]int, c.size)
	for r := range labels {
		labels[r] = r + 1
	}
	for _, f := range strings.Split(peers, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 0 || r >= c.size {
			return nil, fmt.Errorf("pmix: %s=%q names no rank of %d", C.PMIX_LOCAL_PEERS, peers, c.size)
		}
		labels[r] = 0
	}
	if labels[c.rank] != 0 {
		return nil, fmt.Errorf("pmix: %s=%q leaves out this rank, %d", C.PMIX_LOCAL_PEERS, peers, c.rank)
	}
	return core.NewNodeMap(labels), nil
}

// Rank is this process's rank.
func (c *Client) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Client) Size() int { return c.size }

// JobID is the job's PMIx namespace.
func (c *Client) JobID() string { return c.ns }

// Node is the node rank runs on.
func (c *Client) Node(rank int) int { return c.nodes.Node(rank) }

// Nodes is the number of nodes the job spans.
func (c *Client) Nodes() int { return c.nodes.Nodes() }

// Put publishes value under key for the next fence (PMIx_Put, global
// scope).
func (c *Client) Put(key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	ck := C.CString(keyPrefix + key)
	defer C.free(unsafe.Pointer(ck))
	var p *C.char
	if len(value) > 0 {
		p = (*C.char)(unsafe.Pointer(&value[0]))
	}
	if err := status(C.gobtl_put(ck, p, C.size_t(len(value)))); err != nil {
		return fmt.Errorf("pmix: put %q: %w", key, err)
	}
	c.own[key] = append([]byte(nil), value...)
	return nil
}

// Fence commits this rank's puts and waits for every rank's, collecting
// them all (PMIx_Fence with PMIX_COLLECT_DATA), so that later Gets are
// local. ctx bounds the wait; a fence abandoned that way leaves the
// session broken.
func (c *Client) Fence(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- status(C.gobtl_fence(c.cns, timeoutOf(ctx))) }()
	select {
	case err := <-done:
		if err != nil {
			c.broken = fmt.Errorf("pmix: rank %d: fence: %w: %w", c.rank, err, core.ErrPeerLost)
			return c.broken
		}
		return nil
	case <-ctx.Done():
		c.broken = fmt.Errorf("pmix: rank %d: fence: %w", c.rank, ctx.Err())
		return c.broken
	}
}

// Get returns what rank published under key before the last fence.
func (c *Client) Get(ctx context.Context, rank int, key string) ([]byte, error) {
	if rank < 0 || rank >= c.size {
		return nil, fmt.Errorf("pmix: get %q: rank %d is out of range [0,%d)", key, rank, c.size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return nil, err
	}
	if rank == c.rank {
		if v, ok := c.own[key]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("pmix: rank %d has not published %q", rank, key)
	}
	ck := C.CString(keyPrefix + key)
	defer C.free(unsafe.Pointer(ck))
	var p *C.char
	var n C.size_t
	if err := status(C.gobtl_get_bytes(c.cns, C.uint32_t(rank), ck, true, timeoutOf(ctx), &p, &n)); err != nil {
		return nil, fmt.Errorf("pmix: rank %d has not published %q (before the last fence): %w", rank, key, err)
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoBytes(unsafe.Pointer(p), C.int(n)), nil
}

// Abort asks the engine to end the whole job with code (PMIx_Abort on
// every rank of the namespace). PMIx_Abort returns once the engine has
// acted, which usually means never, as this process is among those it
// kills; Abort waits for it at most a few seconds.
func (c *Client) Abort(code int, msg string) error {
	fmt.Fprintf(os.Stderr, "pmix: rank %d aborts the job (status %d): %s\n", c.rank, code, msg)
	cm := C.CString(msg)
	done := make(chan error, 1)
	go func() {
		defer C.free(unsafe.Pointer(cm))
		done <- status(C.gobtl_abort(C.int(code), cm))
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("pmix: abort: %w", err)
		}
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("pmix: abort: the engine has not ended the job after 5s")
	}
}

// Finalize tells the engine this rank ends cleanly (PMIx_Finalize). Call
// it only on success: an engine that sees a rank exit without finalizing
// stops the job.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	c.done = true
	if err := status(C.gobtl_finalize()); err != nil {
		return fmt.Errorf("pmix: finalize: %w", err)
	}
	return nil
}

// Close ends the session without finalizing (the error path): the
// library stays up until the process exits, which the engine sees as an
// abnormal end.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	return nil
}

func (c *Client) usable() error {
	if c.done {
		return fmt.Errorf("pmix: rank %d: %w", c.rank, core.ErrClosed)
	}
	return c.broken
}

// timeoutOf turns ctx's deadline into PMIX_TIMEOUT's whole seconds (0:
// none), rounded up so that a short deadline is not "forever".
func timeoutOf(ctx context.Context) C.int {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	s := math.Ceil(time.Until(dl).Seconds())
	return C.int(max(1, min(s, math.MaxInt32)))
}
