package topo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CPUs is a set of logical CPUs (hardware threads, Linux's cpuN), sorted
// and without repeats: the form of /sys's cpulist files and of
// Cpus_allowed_list.
type CPUs []int

// ParseCPUs reads a CPU list as the kernel writes it ("0-3,8,10-11"); an
// empty string is the empty set.
func ParseCPUs(s string) (CPUs, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out CPUs
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, fmt.Errorf("topo: cpu list %q: %q is not a CPU number", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("topo: cpu list %q: bad range %q", s, part)
			}
		}
		if b-a > maxCPUs {
			return nil, fmt.Errorf("topo: cpu list %q: range %q is too long", s, part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// maxCPUs bounds a parsed range, so that a bad list cannot make a huge set.
const maxCPUs = 1 << 16

// String writes the set as the kernel does, ranges joined ("0-3,8").
func (c CPUs) String() string {
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Has reports whether cpu is in the set.
func (c CPUs) Has(cpu int) bool {
	_, ok := slices.BinarySearch(c, cpu)
	return ok
}

// And is the intersection of c and o.
func (c CPUs) And(o CPUs) CPUs {
	var out CPUs
	for _, x := range c {
		if o.Has(x) {
			out = append(out, x)
		}
	}
	return out
}

// Or is the union of c and o.
func (c CPUs) Or(o CPUs) CPUs {
	out := slices.Concat(c, o)
	slices.Sort(out)
	return slices.Compact(out)
}

// Within reports whether every CPU of c is in o.
func (c CPUs) Within(o CPUs) bool {
	for _, x := range c {
		if !o.Has(x) {
			return false
		}
	}
	return true
}

// Equal reports whether c and o hold the same CPUs.
func (c CPUs) Equal(o CPUs) bool { return slices.Equal(c, o) }

// Set is c as the kernel's affinity mask; a CPU beyond the mask's size
// (1024 CPUs) is an error.
func (c CPUs) Set() (unix.CPUSet, error) {
	var s unix.CPUSet
	for _, x := range c {
		if x >= setBits {
			return s, fmt.Errorf("topo: CPU %d is beyond the affinity mask's %d", x, setBits)
		}
		s.Set(x)
	}
	return s, nil
}

// setBits is the number of CPUs an affinity mask holds.
const setBits = len(unix.CPUSet{}) * int(unsafe.Sizeof(unix.CPUSet{}[0])) * 8

// fromSet is the CPUs of an affinity mask.
func fromSet(s *unix.CPUSet) CPUs {
	var out CPUs
	for x := range setBits {
		if s.IsSet(x) {
			out = append(out, x)
		}
	}
	return out
}
