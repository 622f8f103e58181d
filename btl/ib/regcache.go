package ib

import (
	"container/list"
	"fmt"
	"sort"
	"sync"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// regCache is the registration ("pin-down") cache of seed 000 §3.1:
// registering memory costs a system call and page pinning on hardware, so
// a region stays registered after its last user deregisters it and is
// found again when a later buffer lies inside it; unused regions are
// evicted least recently used first once their bytes exceed the limit.
// Unlike C's pin-down caches it cannot return a stale translation: a
// cached region holds a reference to its Go memory, which therefore stays
// allocated (and unmoved) until eviction.
type regCache struct {
	mu      sync.Mutex
	pd      verbs.PD
	limit   int64
	byAddr  []*region // sorted by start address
	unused  *list.List
	idle    int64 // bytes in unused regions
	bytes   int64 // bytes in all regions
	hits    int64
	misses  int64
	evicted int64
}

// region is one registration in the cache.
type region struct {
	mr    verbs.MR
	start uint64
	end   uint64
	refs  int
	elem  *list.Element // in unused while refs == 0
}

// regView is a core.Region: the caller's buffer inside a cached region.
type regView struct {
	r   *region
	buf []byte
}

func (v *regView) Key() core.MemKey {
	return core.MemKey{Addr: verbs.AddrOf(v.buf), Len: uint64(len(v.buf)), Key: uint64(v.r.mr.RKey())}
}

func (v *regView) Bytes() []byte { return v.buf }

func newRegCache(pd verbs.PD, limit int64) *regCache {
	return &regCache{pd: pd, limit: limit, unused: list.New()}
}

// register returns a region covering buf, registering it on a miss. Every
// registration allows local write, remote read and remote write, so one
// cached region serves any later use of its memory.
func (c *regCache) register(buf []byte) (*regView, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("register an empty buffer")
	}
	start := verbs.AddrOf(buf)
	end := start + uint64(len(buf))
	c.mu.Lock()
	defer c.mu.Unlock()
	// The region starting at or before start with the largest end covers it
	// if any does; regions may overlap, so look at every earlier one.
	i := sort.Search(len(c.byAddr), func(i int) bool { return c.byAddr[i].start > start })
	for j := i - 1; j >= 0; j-- {
		r := c.byAddr[j]
		if r.end >= end {
			c.hits++
			c.use(r)
			return &regView{r: r, buf: buf}, nil
		}
	}
	c.misses++
	mr, err := c.pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	if err != nil {
		return nil, err
	}
	r := &region{mr: mr, start: start, end: end}
	c.byAddr = append(c.byAddr, nil)
	copy(c.byAddr[i+1:], c.byAddr[i:])
	c.byAddr[i] = r
	c.bytes += int64(end - start)
	c.use(r)
	c.evict()
	return &regView{r: r, buf: buf}, nil
}

func (c *regCache) use(r *region) {
	if r.refs == 0 && r.elem != nil {
		c.unused.Remove(r.elem)
		r.elem = nil
		c.idle -= int64(r.end - r.start)
	}
	r.refs++
}

// deregister drops a use; the region stays cached.
func (c *regCache) deregister(v *regView) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := v.r
	if r.refs <= 0 {
		return fmt.Errorf("deregister a region that is not registered")
	}
	r.refs--
	if r.refs == 0 {
		r.elem = c.unused.PushBack(r)
		c.idle += int64(r.end - r.start)
		c.evict()
	}
	return nil
}

// evict deregisters unused regions, oldest first, while the cache holds
// more than its limit.
func (c *regCache) evict() {
	for c.idle > 0 && c.total() > c.limit {
		e := c.unused.Front()
		r := e.Value.(*region)
		c.unused.Remove(e)
		r.elem = nil
		c.idle -= int64(r.end - r.start)
		c.drop(r)
		c.evicted++
	}
}

func (c *regCache) total() int64 { return c.bytes }

func (c *regCache) drop(r *region) {
	for i, x := range c.byAddr {
		if x == r {
			c.byAddr = append(c.byAddr[:i], c.byAddr[i+1:]...)
			c.bytes -= int64(r.end - r.start)
			break
		}
	}
	r.mr.Dereg()
}

func (c *regCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.byAddr {
		r.mr.Dereg()
	}
	c.byAddr = nil
	c.unused.Init()
	c.idle, c.bytes = 0, 0
}

// lkeyFor returns the local key covering b, which must lie in the view's
// region.
func (v *regView) lkeyFor(b []byte) (uint32, bool) {
	a := verbs.AddrOf(b)
	if len(b) == 0 {
		return v.r.mr.LKey(), true
	}
	if a < v.r.start || a+uint64(len(b)) > v.r.end {
		return 0, false
	}
	return v.r.mr.LKey(), true
}

// RegisterMem registers buf through the device's registration cache. The
// key it returns is valid on every module of the device.
func (m *module) RegisterMem(buf []byte, access core.Access) (core.Region, error) {
	if m.closed {
		return nil, errClosed
	}
	v, err := m.tx.reg.register(buf)
	if err != nil {
		return nil, fmt.Errorf("ib %s: register %d bytes: %w", m.id, len(buf), err)
	}
	return v, nil
}

// DeregisterMem releases a registration; the memory stays registered in
// the cache until evicted.
func (m *module) DeregisterMem(r core.Region) error {
	v, ok := r.(*regView)
	if !ok {
		return fmt.Errorf("ib %s: deregister a region of another transport (%T)", m.id, r)
	}
	if err := m.tx.reg.deregister(v); err != nil {
		return fmt.Errorf("ib %s: %w", m.id, err)
	}
	return nil
}
