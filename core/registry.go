package core

import (
	"fmt"
	"sort"
	"sync"

	"github.com/rs/zerolog"
)

// Kind is a kind of component.
type Kind string

// The kinds of components.
const (
	KindBTL         Kind = "btl"
	KindFlowControl Kind = "flow_control"
	KindRecvBuf     Kind = "recvbuf"
	KindSched       Kind = "sched"
)

// PolicyKinds lists the kinds that are policies (and may be plugins).
var PolicyKinds = []Kind{KindFlowControl, KindRecvBuf, KindSched}

// Component is a registered, named implementation of a kind. Components
// register themselves from init (the database/sql driver pattern); the
// root package and cmd/gobtl import them for that side effect.
type Component struct {
	Kind Kind
	Name string
	// Doc is a one-paragraph description shown by `gobtl info`.
	Doc string
	// Params is the schema of the component's HCL block.
	Params []Param
	// OpenBTL opens a BTL component's modules (KindBTL only). Register
	// wraps it so that env carries the Defaults the job did not replace.
	OpenBTL func(env BTLEnv) ([]Module, error)
	// Defaults names, for a BTL, the registered policy of each kind it
	// runs when the job configures none (KindFlowControl, KindRecvBuf):
	// btl "ib" runs recvbuf "srq". It is built with its own defaults but
	// for the parameters it shares by name with the BTL's block that the
	// block sets.
	Defaults map[Kind]string
	// NewPolicy builds a policy (policy kinds only): a FlowControl,
	// RecvBuffers or Scheduler according to Kind.
	NewPolicy func(p Params) (any, error)
	// Deprecated are former names of the component: Lookup still finds
	// it by them, and a stack file that uses one loads with a warning.
	Deprecated []string
	// Reach is which peers a BTL component's modules can reach (KindBTL
	// only): `gobtl config check` warns about a stack whose transports
	// reach no other process.
	Reach Reach
}

// Reach says which ranks of a job a BTL can connect, from nearest to
// farthest; a transport that reaches a farther class reaches the nearer
// ones too, except ReachSelf, which reaches nothing else.
type Reach uint8

// The reaches of BTL components.
const (
	// ReachUnknown is a component that does not say (it is never warned
	// about).
	ReachUnknown Reach = iota
	// ReachSelf is the rank itself only (btl "self").
	ReachSelf
	// ReachProcess is ranks that are goroutines of one process
	// (gobtl.RunLocal's btl "inproc").
	ReachProcess
	// ReachHost is processes on one host (btl "sm").
	ReachHost
	// ReachNetwork is processes on any host (btl "ib", btl "extoll").
	ReachNetwork
)

func (r Reach) String() string {
	switch r {
	case ReachSelf:
		return "this rank only"
	case ReachProcess:
		return "ranks in this process only"
	case ReachHost:
		return "ranks on this host"
	case ReachNetwork:
		return "ranks on any host"
	}
	return "unknown"
}

// BTLEnv is what a BTL component gets when it opens.
type BTLEnv struct {
	// Instance is the block's second label: btl "ib" "rail0" -> "rail0".
	Instance string
	Params   Params
	Boot     Bootstrap
	// Locality says which ranks share this rank's node, as the engine
	// that started the job knows it; nil when unknown (a BTL opened
	// outside gobtl.Init), and the BTL then judges for itself.
	Locality Locality
	Clock    Clock
	Log      zerolog.Logger
	Metrics  *Metrics
	// FlowControl and RecvBuffers are the job's policies of those kinds,
	// or the component's Defaults; nil when neither names one.
	FlowControl FlowControl
	RecvBuffers RecvBuffers
	// JobKey is the job's secret, with which a BTL that accepts
	// connections makes every link prove it belongs to the job (Prove,
	// Check); gobtl.Init exchanges it before any BTL opens. Read it with
	// Key.
	JobKey *JobKey
}

// Key returns the job's key: env.JobKey, else the one the bootstrap holds
// (JobKeyOf), else an error wrapping ErrNoJobKey — a BTL that accepts
// connections must not open without one.
func (env BTLEnv) Key() (*JobKey, error) {
	if env.JobKey != nil {
		return env.JobKey, nil
	}
	if env.Boot != nil {
		if k := JobKeyOf(env.Boot); k != nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("core: BTLEnv: %w (gobtl.Init exchanges one; see ExchangeJobKey)", ErrNoJobKey)
}

var registry = struct {
	sync.RWMutex
	m     map[Kind]map[string]*Component
	alias map[Kind]map[string]*Component // deprecated names
}{m: map[Kind]map[string]*Component{}, alias: map[Kind]map[string]*Component{}}

// Register adds c to the registry. It panics on a duplicate or malformed
// entry: registration happens at init, where a panic is a build error.
func Register(c *Component) {
	if c.Name == "" || c.Kind == "" {
		panic("core: Register: component needs a kind and a name")
	}
	if (c.Kind == KindBTL) != (c.OpenBTL != nil) || (c.Kind != KindBTL) != (c.NewPolicy != nil) {
		panic(fmt.Sprintf("core: Register %s %q: wrong constructor for the kind", c.Kind, c.Name))
	}
	if _, err := NewParams(c.Params); err != nil {
		panic(fmt.Sprintf("core: Register %s %q: %v", c.Kind, c.Name, err))
	}
	for k := range c.Defaults {
		if c.Kind != KindBTL || k != KindFlowControl && k != KindRecvBuf {
			panic(fmt.Sprintf("core: Register %s %q: a default %s policy", c.Kind, c.Name, k))
		}
	}
	if len(c.Defaults) > 0 {
		c.OpenBTL = withDefaults(c, c.OpenBTL)
	}
	registry.Lock()
	defer registry.Unlock()
	byName := registry.m[c.Kind]
	if byName == nil {
		byName = map[string]*Component{}
		registry.m[c.Kind] = byName
	}
	aliases := registry.alias[c.Kind]
	if aliases == nil {
		aliases = map[string]*Component{}
		registry.alias[c.Kind] = aliases
	}
	for _, n := range append([]string{c.Name}, c.Deprecated...) {
		if _, dup := byName[n]; dup {
			panic(fmt.Sprintf("core: Register: %s %q registered twice", c.Kind, n))
		}
		if old, dup := aliases[n]; dup {
			panic(fmt.Sprintf("core: Register: %s %q is a former name of %q", c.Kind, n, old.Name))
		}
	}
	byName[c.Name] = c
	for _, n := range c.Deprecated {
		aliases[n] = c
	}
}

// Lookup finds a registered component by its name or a former one (then
// c.Name differs from name: the caller warns that name is deprecated).
func Lookup(kind Kind, name string) (*Component, bool) {
	registry.RLock()
	defer registry.RUnlock()
	if c, ok := registry.m[kind][name]; ok {
		return c, true
	}
	c, ok := registry.alias[kind][name]
	return c, ok
}

// Components lists the components of kind, sorted by name.
func Components(kind Kind) []*Component {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]*Component, 0, len(registry.m[kind]))
	for _, c := range registry.m[kind] {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Kinds lists the kinds that have at least one component, sorted.
func Kinds() []Kind {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Kind, 0, len(registry.m))
	for k := range registry.m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
