package simrc

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/sim"
)

// Link is a port's LogGP model.
type Link struct {
	// Latency is L, the wire and switch time of a message.
	Latency time.Duration
	// Overhead is o, the sender's time before a message leaves.
	Overhead time.Duration
	// RecvOverhead is o_r, the receiving rank's CPU time per frame it
	// takes from its CQ: the rank pays it, in virtual time, before it
	// handles the frames of a poll, and frames that land meanwhile wait
	// for its next poll. Without it a rank handles every frame the
	// instant it lands, one per progress call, and never sees frames
	// batch up as a real process does (which decides, for one, how many
	// explicit credit frames a receiver sends).
	RecvOverhead time.Duration
	// Gap is g, the least time between two messages leaving a port.
	Gap time.Duration
	// Rate is 1/G in bytes per second (0: unlimited).
	Rate float64
}

// DefaultLink is a 4x SDR/DDR-era port, as in seed 000's cluster:
// 1 GB/s, 2 µs latency.
var DefaultLink = Link{Latency: 2 * time.Microsecond, Overhead: 300 * time.Nanosecond, RecvOverhead: 300 * time.Nanosecond,
	Gap: 100 * time.Nanosecond, Rate: 1e9}

func (l Link) wire(n int) time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(n) / l.Rate * 1e9)
}

// Fabric is the simulated network of one job: every port of every
// rank's devices.
type Fabric struct {
	s     *sim.Sched
	model func(rank int, dev string, port uint8) Link
	ports []*port // by LID-1
	devs  map[string]*Device
	order []*Device
}

const fabricKey = "btl/ib/simrc"

// FabricOf returns the fabric of the job s schedules.
func FabricOf(s *sim.Sched) *Fabric {
	return s.Value(fabricKey, func() any {
		return &Fabric{s: s, devs: map[string]*Device{}, model: func(int, string, uint8) Link { return DefaultLink }}
	}).(*Fabric)
}

// SetModel sets the link model of every port opened from now on.
func (f *Fabric) SetModel(m func(rank int, dev string, port uint8) Link) { f.model = m }

// Devices are the devices opened so far, in the order they were opened.
func (f *Fabric) Devices() []*Device { return f.order }

// send models n bytes from src to dst ports: the time they land at dst
// (the receiver's overhead is its CPU's, paid when it polls them).
func (f *Fabric) send(src, dst *port, n int) time.Duration {
	now := f.s.Now()
	ls, ld := src.link, dst.link
	depart := max(now+ls.Overhead, src.txFree)
	src.txFree = depart + max(ls.Gap, ls.wire(n))
	arrive := depart + ls.wire(n) + ls.Latency
	in := max(arrive, dst.rxFree+ld.wire(n))
	dst.rxFree = in
	return in
}

// ack is when a response without payload (ACK, NAK, read request) sent
// now from src reaches dst: latency only.
func (f *Fabric) ack(src *port) time.Duration { return f.s.Now() + src.link.Latency }

func (f *Fabric) portOf(gid verbs.GID, lid uint16) *port {
	if lid == 0 || int(lid) > len(f.ports) {
		return nil
	}
	p := f.ports[lid-1]
	if p.gid != gid {
		return nil
	}
	return p
}

// Provider is the "sim" verbs provider for one rank.
type Provider struct {
	f    *Fabric
	rank int
}

func init() {
	verbs.RegisterProvider("sim", func(scope string) (verbs.Provider, error) {
		// The ib BTL's scope is "<job id>/<rank>".
		i := strings.LastIndexByte(scope, '/')
		if i < 0 {
			return nil, fmt.Errorf("simrc: scope %q is not <job>/<rank>", scope)
		}
		r, err := strconv.Atoi(scope[i+1:])
		if err != nil {
			return nil, fmt.Errorf("simrc: scope %q: %w", scope, err)
		}
		s := sim.Lookup(scope[:i])
		if s == nil {
			return nil, fmt.Errorf("simrc: job %q is not a simulated job (run it under gobtl sim): %w", scope[:i], verbs.ErrNoDevice)
		}
		return &Provider{f: FabricOf(s), rank: r}, nil
	})
}

// Name is "sim".
func (p *Provider) Name() string { return "sim" }

// Devices lists the one device a rank has by default.
func (p *Provider) Devices() ([]verbs.DeviceInfo, error) {
	return []verbs.DeviceInfo{{Name: "sim0", GUID: uint64(p.rank)<<8 | 1}}, nil
}

// Ports is how many ports a simulated device has.
const Ports = 8

// Open opens this rank's device called name.
func (p *Provider) Open(name string) (verbs.Device, error) {
	f := p.f
	key := fmt.Sprintf("%d/%s", p.rank, name)
	if d := f.devs[key]; d != nil && !d.closed {
		return nil, fmt.Errorf("simrc: device %s of rank %d is already open: %w", name, p.rank, verbs.ErrInvalid)
	}
	d := &Device{f: f, rank: p.rank, name: name, qps: map[uint32]*qp{}, mrs: map[uint32]*mr{}, nextQPN: 0x100}
	for i := 0; i < Ports; i++ {
		if len(f.ports) >= 0xfffe {
			return nil, fmt.Errorf("simrc: the fabric has run out of LIDs: %w", verbs.ErrNoDevice)
		}
		pt := &port{d: d, num: uint8(i + 1), lid: uint16(len(f.ports) + 1), link: f.model(p.rank, name, uint8(i+1))}
		binary.BigEndian.PutUint16(pt.gid[0:], 0xfe80)
		binary.BigEndian.PutUint32(pt.gid[8:], uint32(p.rank))
		binary.BigEndian.PutUint16(pt.gid[12:], pt.lid)
		f.ports = append(f.ports, pt)
		d.ports = append(d.ports, pt)
	}
	f.devs[key] = d
	f.order = append(f.order, d)
	return d, nil
}

type port struct {
	d      *Device
	num    uint8
	lid    uint16
	gid    verbs.GID
	link   Link
	txFree time.Duration
	rxFree time.Duration
}

func timeOf(d interface{ Nanoseconds() int64 }) time.Duration { return time.Duration(d.Nanoseconds()) }
