package multirail

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gobtl/gobtl/experiment"
)

// Rail is one btl "ib" block on softrc: one port of its own device.
type Rail struct {
	// Name is the block's instance name and the device's.
	Name string
	// Rate is the port's link rate ("1GB/s"); empty is unlimited.
	Rate string
	// Delay is the port's extra latency ("50us"); empty is none.
	Delay string
	// Link names a link shared with other jobs' ports (see btl/ib's link).
	Link string
}

// Stack is a job's stack: self, the rails, and a scheduling policy.
type Stack struct {
	Protocol string
	Rails    []Rail
	// Policy is a built-in scheduling policy; empty leaves the PML's
	// default (round robin, even striping).
	Policy string
	// Params of the policy block, as HCL expressions (`"round_robin"`,
	// `[4, 1]`, `0.5`).
	Params map[string]string
	// Choose renders the lines that choose the policy by name
	// (experiment.Env.PolicyLines: built in or a plugin); nil: built in.
	Choose func(name string) string
}

// HCL renders the stack file.
func (s Stack) HCL() string {
	var b strings.Builder
	proto := s.Protocol
	if proto == "" {
		proto = "rdma_read"
	}
	fmt.Fprintf(&b, "job {\n  protocol = %q\n%s}\n\nbtl \"self\" \"self\" {}\n", proto, experiment.Progress)
	for _, r := range s.Rails {
		fmt.Fprintf(&b, "\nbtl \"ib\" %q {\n  device = %q\n  port   = 1\n", r.Name, r.Name)
		if r.Rate != "" {
			fmt.Fprintf(&b, "  rate   = %q\n", r.Rate)
		}
		if r.Delay != "" {
			fmt.Fprintf(&b, "  delay  = %q\n", r.Delay)
		}
		if r.Link != "" {
			fmt.Fprintf(&b, "  link   = %q\n", r.Link)
		}
		b.WriteString("}\n")
	}
	if s.Policy != "" {
		choose := s.Choose
		if choose == nil {
			choose = func(name string) string { return fmt.Sprintf("  builtin = %q\n", name) }
		}
		fmt.Fprintf(&b, "\npolicy \"sched\" {\n%s", choose(s.Policy))
		keys := make([]string, 0, len(s.Params))
		for k := range s.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s = %s\n", k, s.Params[k])
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// Rails of the experiments. The paper's 4x SDR HCAs moved ~1GB/s
// (884 MB/s measured through MPI), a 1x link a quarter of that.
const (
	rate4x = "1GB/s"
	rate1x = "250MB/s"
)

// striping is the policy block of a striping policy, with the paper's
// default multiplexing (round robin) for small messages.
func striping(policy string, extra map[string]string) (string, map[string]string) {
	p := map[string]string{
		"small":            `"round_robin"`,
		"stripe_threshold": `"64KiB"`,
		"min_stripe":       `"16KiB"`,
	}
	for k, v := range extra {
		p[k] = v
	}
	return policy, p
}
