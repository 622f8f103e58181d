package topo

import (
	"errors"
	"fmt"
	"strings"
)

// Level is what a rank is mapped or bound to: a core, a NUMA node, a
// socket, or (binding only) nothing.
type Level uint8

// The levels. LevelDefault is the zero value: the policy's own choice.
const (
	LevelDefault Level = iota
	LevelNone
	LevelCore
	LevelNUMA
	LevelSocket
)

var levelNames = [...]string{LevelDefault: "", LevelNone: "none", LevelCore: "core", LevelNUMA: "numa", LevelSocket: "socket"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", l)
}

// MapLevels and BindLevels are the names --map-by and --bind-to accept.
var (
	MapLevels  = []string{"core", "numa", "socket"}
	BindLevels = []string{"core", "numa", "socket", "none"}
)

// ParseLevel reads a level among those names allows.
func ParseLevel(s string, names []string) (Level, error) {
	for _, n := range names {
		if s == n {
			for l, ln := range levelNames {
				if ln == s {
					return Level(l), nil
				}
			}
		}
	}
	return LevelDefault, fmt.Errorf("%q is not one of %s", s, strings.Join(names, ", "))
}

// ErrOversubscribed is why a binding that was asked for cannot be made:
// there are more ranks than cores.
var ErrOversubscribed = errors.New("more ranks than cores")

// Policy is how a launcher maps its ranks onto the node's cores and what
// it binds each to, as mpirun's --map-by and --bind-to.
type Policy struct {
	// MapBy spreads the ranks: LevelCore fills the cores in order (the
	// default), LevelSocket and LevelNUMA deal ranks round-robin over the sockets
	// or NUMA nodes, each taking the next free core of its domain.
	MapBy Level
	// BindTo is each rank's affinity: its core, the NUMA node or socket
	// of that core, or LevelNone. LevelDefault binds to the core when every rank
	// gets a core of its own and binds nothing otherwise.
	BindTo Level
	// Report asks the launcher to print every rank's binding
	// (--report-bindings).
	Report bool
}

// Slot is where one rank runs.
type Slot struct {
	// Core is the core the rank was mapped to.
	Core Core
	// CPUs is the rank's affinity: Core's threads, its NUMA node's or its
	// socket's CPUs.
	CPUs CPUs
}

// Plan is a job's placement: a Slot per rank, or none when nothing is
// bound; Note says why not when the policy would have bound.
type Plan struct {
	Slots []Slot
	Note  string
}

// Place maps np ranks onto t (the part of the node the launcher may use,
// Topology.Within its affinity) by p. More ranks than cores bind nothing
// by default — the ranks share the cores and yield when they wait, and
// Note says so — and are an error wrapping ErrOversubscribed when p asks
// for a binding.
func (p Policy) Place(t *Topology, np int) (Plan, error) {
	cores := len(t.Cores)
	if np > cores {
		switch p.BindTo {
		case LevelDefault:
			return Plan{Note: fmt.Sprintf("%d ranks on %s (cpus %v): oversubscribed, no rank is bound; a waiting rank yields its CPU", np, plural(cores, "core"), t.CPUs)}, nil
		case LevelNone:
			return Plan{}, nil
		}
		return Plan{}, fmt.Errorf("bind to %v: %d ranks on %s (cpus %v): %w; bind to none to run them unbound", p.BindTo, np, plural(cores, "core"), t.CPUs, ErrOversubscribed)
	}
	if p.BindTo == LevelNone {
		return Plan{}, nil
	}
	order, err := t.mapping(np, p.MapBy)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Slots: make([]Slot, np)}
	for r, i := range order {
		c := t.Cores[i]
		s := Slot{Core: c, CPUs: c.CPUs}
		switch p.BindTo {
		case LevelNUMA:
			s.CPUs = domainOf(t.NUMA, c.NUMA)
		case LevelSocket:
			s.CPUs = domainOf(t.Sockets, c.Socket)
		}
		plan.Slots[r] = s
	}
	return plan, nil
}

// mapping is the index in t.Cores of each of np ranks (np ≤ cores).
func (t *Topology) mapping(np int, by Level) ([]int, error) {
	out := make([]int, 0, np)
	var key func(Core) int
	switch by {
	case LevelDefault, LevelCore:
		for i := range np {
			out = append(out, i)
		}
		return out, nil
	case LevelNUMA:
		key = func(c Core) int { return c.NUMA }
	case LevelSocket:
		key = func(c Core) int { return c.Socket }
	default:
		return nil, fmt.Errorf("map by %v: not a level ranks are mapped by", by)
	}
	// The cores of each domain, in t.Cores' order, domains by first core.
	var groups [][]int
	at := map[int]int{}
	for i, c := range t.Cores {
		g, ok := at[key(c)]
		if !ok {
			g = len(groups)
			at[key(c)] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	next := make([]int, len(groups))
	for g := 0; len(out) < np; g = (g + 1) % len(groups) {
		if next[g] < len(groups[g]) { // a full domain passes its turn on
			out = append(out, groups[g][next[g]])
			next[g]++
		}
	}
	return out, nil
}

func domainOf(ds []Domain, id int) CPUs {
	for _, d := range ds {
		if d.ID == id {
			return d.CPUs
		}
	}
	return nil
}

// Describe names a set of CPUs in t's terms: "core 2 of socket 0 (cpus
// 2,10)", "socket 0 (...)", "numa 1 (cpus 4-7,12-15)", "all of cpus 0-15"
// when it is the whole of t and nothing smaller, else "cpus ...".
func (t *Topology) Describe(set CPUs) string {
	if t == nil {
		return "cpus " + set.String()
	}
	for _, c := range t.Cores {
		if set.Equal(c.CPUs) {
			return fmt.Sprintf("core %d of socket %d (cpus %v)", c.ID, c.Socket, set)
		}
	}
	for _, d := range t.Sockets {
		if set.Equal(d.CPUs) {
			return fmt.Sprintf("socket %d (cpus %v)", d.ID, set)
		}
	}
	for _, d := range t.NUMA {
		if set.Equal(d.CPUs) && len(t.NUMA) > 1 {
			return fmt.Sprintf("numa %d (cpus %v)", d.ID, set)
		}
	}
	if set.Equal(t.CPUs) {
		return "all of cpus " + set.String()
	}
	return "cpus " + set.String()
}

// Draw is Open MPI's picture of a binding: a bracket per socket, its
// cores separated by '/', a 'B' for each hardware thread in set and a
// '.' for the others: "[BB/../../..][../../../..]".
func (t *Topology) Draw(set CPUs) string {
	var b strings.Builder
	sock := -1
	for _, c := range t.Cores {
		if c.Socket != sock {
			if sock >= 0 {
				b.WriteByte(']')
			}
			b.WriteByte('[')
			sock = c.Socket
		} else {
			b.WriteByte('/')
		}
		for _, x := range c.CPUs {
			if set.Has(x) {
				b.WriteByte('B')
			} else {
				b.WriteByte('.')
			}
		}
	}
	if sock >= 0 {
		b.WriteByte(']')
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
