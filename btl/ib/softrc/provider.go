package softrc

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gobtl/gobtl/btl/ib/verbs"
	"github.com/gobtl/gobtl/core"
)

// PortConfig configures one port of a softrc device.
type PortConfig struct {
	// Addr is where the port listens and what it advertises as its GID: an
	// IP address, a host name or a network interface name ("eth0"). Empty
	// means 127.0.0.1.
	Addr string
	// Rate is the link rate in bytes per second; 0 means unlimited.
	Rate float64
	// Delay is added to every packet leaving the port: a longer path, or
	// a rail of higher latency (seed 001 §4.4).
	Delay time.Duration
	// Link names the physical link the port stands for. Ports of any
	// processes on this host that name the same link share one link rate
	// (a token bucket in shared memory, link_shared.go), as the ranks of
	// two jobs on one node share an HCA port. Empty: the port's own.
	Link string
}

// DeviceConfig configures a softrc device.
type DeviceConfig struct {
	// Ports is how many ports the device has (default 2).
	Ports int
	// IdleAfter is how long the process must go without polling before the
	// device's own goroutine takes over serving the wire (default 200 µs:
	// a polling process re-arms the idle timer every IdleAfter/2, and at
	// 50 µs that cost two busy ranks 1.5-4 µs of latency).
	IdleAfter time.Duration
	// AckDelay is how long a responder may hold an ACK hoping to
	// piggyback it on a packet going the other way (default 20 µs).
	AckDelay time.Duration
	// PinNIC runs the device goroutine on an OS thread of its own, pinned
	// to NICCPU (when negative, the (-NICCPU)th CPU the process may use,
	// counted from the last), and keeps the process's other threads off
	// that CPU (pin.go).
	PinNIC bool
	NICCPU int
	// Key is the job's secret: every link between two ports proves with
	// it that both ends belong to the job before it carries anything
	// (auth.go). A device without one starts no port.
	Key *core.JobKey
}

func (c DeviceConfig) withDefaults() DeviceConfig {
	if c.Ports <= 0 {
		c.Ports = 2
	}
	if c.IdleAfter <= 0 {
		c.IdleAfter = 200 * time.Microsecond
	}
	if c.AckDelay <= 0 {
		c.AckDelay = 20 * time.Microsecond
	}
	return c
}

// Provider lists and opens softrc devices. Devices are per process: every
// Open of the same name returns the same device until the last Close, as
// every ibv_open_device of one HCA reaches the same hardware.
type Provider struct {
	mu    sync.Mutex
	devs  map[string]*Device
	cfg   map[string]DeviceConfig
	ports map[string]map[uint8]PortConfig
}

// NewProvider returns a provider with no devices configured; any name
// opens a device with the default configuration.
func NewProvider() *Provider {
	return &Provider{devs: map[string]*Device{}, cfg: map[string]DeviceConfig{}, ports: map[string]map[uint8]PortConfig{}}
}

// Default is the process's softrc provider (scope "").
var Default = NewProvider()

var scopes = struct {
	sync.Mutex
	m map[string]*Provider
}{m: map[string]*Provider{"": Default}}

// Scope returns the provider of a scope: the devices of one host, when
// several ranks that model separate hosts share a process. Scope("") is
// Default.
func Scope(name string) *Provider {
	scopes.Lock()
	defer scopes.Unlock()
	p := scopes.m[name]
	if p == nil {
		p = NewProvider()
		scopes.m[name] = p
	}
	return p
}

func init() {
	verbs.RegisterProvider("softrc", func(scope string) (verbs.Provider, error) { return Scope(scope), nil })
}

// Name returns "softrc".
func (p *Provider) Name() string { return "softrc" }

// Configure sets a device's configuration before it is first opened. It
// fails if the device is open with a different configuration.
func (p *Provider) Configure(name string, cfg DeviceConfig) error {
	cfg = cfg.withDefaults()
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.devs[name]; d != nil && d.cfg != cfg {
		return fmt.Errorf("softrc: device %s is open with %d ports, idle-after %v, ack delay %v: cannot reconfigure",
			name, d.cfg.Ports, d.cfg.IdleAfter, d.cfg.AckDelay)
	}
	p.cfg[name] = cfg
	return nil
}

// ConfigurePort sets one port's address and rate. It may be called while
// the device is open, as long as the port has not started (its first
// QueryPort or connection starts it) or the configuration is unchanged.
func (p *Provider) ConfigurePort(name string, num uint8, pc PortConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.devs[name]; d != nil {
		return d.configurePort(num, pc)
	}
	if p.ports[name] == nil {
		p.ports[name] = map[uint8]PortConfig{}
	}
	if old, ok := p.ports[name][num]; ok && old != pc {
		return fmt.Errorf("softrc: %s port %d already configured as %+v", name, num, old)
	}
	p.ports[name][num] = pc
	return nil
}

// Devices lists the devices that are configured or open.
func (p *Provider) Devices() ([]verbs.DeviceInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []verbs.DeviceInfo
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, verbs.DeviceInfo{Name: n, GUID: guidOf(n)})
		}
	}
	for n := range p.devs {
		add(n)
	}
	for n := range p.cfg {
		add(n)
	}
	for n := range p.ports {
		add(n)
	}
	if len(out) == 0 {
		add("softrc0")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Open opens the named device, creating it on first use.
func (p *Provider) Open(name string) (verbs.Device, error) {
	d, err := p.OpenDevice(name)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OpenDevice is Open returning the concrete device, for its fault hooks
// and statistics.
func (p *Provider) OpenDevice(name string) (*Device, error) {
	if name == "" {
		return nil, fmt.Errorf("softrc: empty device name: %w", verbs.ErrNoDevice)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.devs[name]; d != nil {
		d.mu.Lock()
		d.refs++
		d.mu.Unlock()
		return d, nil
	}
	d, err := newDevice(p, name, p.cfg[name].withDefaults())
	if err != nil {
		return nil, err
	}
	for num, pc := range p.ports[name] {
		if err := d.configurePort(num, pc); err != nil {
			d.shutdown()
			return nil, err
		}
	}
	p.devs[name] = d
	return d, nil
}

func (p *Provider) forget(d *Device) {
	p.mu.Lock()
	if p.devs[d.name] == d {
		delete(p.devs, d.name)
	}
	p.mu.Unlock()
}

func guidOf(name string) uint64 {
	// FNV-1a of the name with a softrc prefix: stable per name.
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return 0x5053_0000_0000_0000 | h&0xffff_ffff_ffff
}
