// Package mailboxsplit is the mailbox arithmetic the two EXTOLL credit
// policies share (seed 003 §5.2, §6.3): a data region for the senders'
// quotas and a credit region of creditSlots per peer, checked against
// Equation 2, data region >= credit region >= 1 slot per process.
package mailboxsplit

import (
	"fmt"

	"github.com/gobtl/gobtl/core"
)

// Quota checks the layout of info's mailbox with creditSlots per peer and
// returns each sender's equal share of the data region. name prefixes
// errors.
func Quota(name string, info core.FlowInfo, creditSlots int) (int, error) {
	k, n := creditSlots, info.Peers
	switch {
	case info.Transport != "extoll":
		return 0, fmt.Errorf("%s: serves the extoll transport, not %q", name, info.Transport)
	case k < 1:
		return 0, fmt.Errorf("%s: credit_slots = %d, need at least 1 (Equation 2)", name, k)
	case n < 1:
		return 0, fmt.Errorf("%s: no peers", name)
	}
	data := info.Buffers - k*n
	if data < k*n {
		return 0, fmt.Errorf("%s: a mailbox of %d slots for %d peers leaves %d data slots beside a %d-slot credit region; Equation 2 needs at least %d slots (%d per peer)",
			name, info.Buffers, n, max(data, 0), k*n, 2*k*n, 2*k)
	}
	return data / n, nil
}

// AtLeast is a parameter check: an int64 of at least n.
func AtLeast(n int64) func(any) error {
	return func(v any) error {
		if v.(int64) < n {
			return fmt.Errorf("must be at least %d", n)
		}
		return nil
	}
}
