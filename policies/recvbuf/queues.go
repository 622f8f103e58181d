// Package recvbuf holds what the receive-buffer policies share: Open MPI's
// receive_queues syntax and the checks every layout must pass. The
// policies themselves are its subpackages — perpeer (each peer its own
// queue of N buffers of size S, Open MPI 1.2's default), srq (one shared
// receive queue per size, grown on the SRQ-limit event) and bsrq (seed
// 002 §3's Bucket SRQ: per-peer tiny buffers under credits plus a slab of
// power-of-two buckets, each its own SRQ).
//
// A layout is a core.RecvSetup: queues sorted by buffer size, each per-peer
// ("P") or shared ("S"). A buffer's size counts the whole frame, the
// 32-byte gobtl header included, as Open MPI's sizes count its own header;
// a sender puts each frame on the smallest queue that holds it (seed 002
// §3), and the mechanism in the BTL records buffer utilization =
// frame size / buffer size per queue (§4).
package recvbuf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gobtl/gobtl/core"
)

// ParseReceiveQueues parses Open MPI's btl_openib_receive_queues syntax:
// queues separated by colons, each
//
//	P,<size>,<count>[,<low watermark>[,<credit window>[,<reserve>]]]
//	S,<size>,<count>[,<low watermark>[,<max pending sends>]]
//
// as in "P,128,256,192,128:S,2048,1024,1008,64". For a per-peer queue the
// credit window becomes QueueSpec.Low (credits go back explicitly once this
// many are owed; default count/2); the low watermark and reserve are
// checked and otherwise unused, because gobtl reposts every buffer as soon
// as its frame is handled and sends credit messages outside flow control
// (seed 000 §4.2's optimistic scheme). For a shared queue the low watermark
// is the srq_limit (default count - count/16) and max pending sends becomes
// QueueSpec.MaxPending (default: no bound).
func ParseReceiveQueues(s string) ([]core.QueueSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("receive_queues: empty")
	}
	var out []core.QueueSpec
	for i, part := range strings.Split(s, ":") {
		f := strings.Split(strings.TrimSpace(part), ",")
		where := fmt.Sprintf("receive_queues queue %d (%q)", i+1, part)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s: want P|S,<size>,<count>[,...]", where)
		}
		nums := make([]int, len(f)-1)
		for k, x := range f[1:] {
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s: field %d %q is not a non-negative integer", where, k+2, x)
			}
			nums[k] = n
		}
		size, count := nums[0], nums[1]
		if count < 1 {
			return nil, fmt.Errorf("%s: a queue needs at least one buffer", where)
		}
		q := core.QueueSpec{BufSize: size, Count: count}
		switch strings.ToUpper(strings.TrimSpace(f[0])) {
		case "P":
			if len(nums) > 5 {
				return nil, fmt.Errorf("%s: a P queue has at most 5 numbers", where)
			}
			q.Kind = core.QueuePerPeer
			low, win := count*3/4, max(1, count/2)
			if len(nums) > 2 {
				low = nums[2]
			}
			if len(nums) > 3 {
				win = nums[3]
			}
			if low > count {
				return nil, fmt.Errorf("%s: low watermark %d exceeds the %d buffers", where, low, count)
			}
			if win < 1 || win > count {
				return nil, fmt.Errorf("%s: credit window %d not in [1, %d]", where, win, count)
			}
			if len(nums) > 4 && nums[4] > count {
				return nil, fmt.Errorf("%s: reserve %d exceeds the %d buffers", where, nums[4], count)
			}
			q.Low = win
		case "S":
			if len(nums) > 4 {
				return nil, fmt.Errorf("%s: an S queue has at most 4 numbers", where)
			}
			q.Kind = core.QueueShared
			q.Low = count - count/16
			if len(nums) > 2 {
				q.Low = nums[2]
			}
			if q.Low > count {
				return nil, fmt.Errorf("%s: low watermark %d exceeds the %d buffers", where, q.Low, count)
			}
			if len(nums) > 3 {
				q.MaxPending = nums[3]
			}
		default:
			return nil, fmt.Errorf("%s: queue type %q, want P or S", where, f[0])
		}
		out = append(out, q)
	}
	return out, nil
}

// Fixed is the policy all three built-ins are: a layout chosen once, whose
// shared queues grow by Grow × their initial buffers (at least one) each
// time their SRQ-limit event fires, up to their Max, the limit re-armed at
// Low. Per-peer queues stay as they are: the credit engine owns them.
type Fixed struct {
	// Name prefixes errors ("recvbuf bsrq").
	Name            string
	Queues          []core.QueueSpec
	Grow            float64
	SendFreeListMax int
}

// Setup checks the layout against the transport and returns a copy.
func (p *Fixed) Setup(info core.RecvInfo) (core.RecvSetup, error) {
	s := core.RecvSetup{Queues: append([]core.QueueSpec(nil), p.Queues...), SendFreeListMax: p.SendFreeListMax}
	if err := s.Check(info); err != nil {
		return core.RecvSetup{}, fmt.Errorf("%s: %w", p.Name, err)
	}
	return s, nil
}

// Observe grows a shared queue that hit its limit and re-arms the limit.
func (p *Fixed) Observe(events []core.RecvEvent, out []core.RecvDecision) []core.RecvDecision {
	return Grow(events, out, p.Queues, func(q core.QueueSpec) int { return max(1, int(float64(q.Count)*p.Grow)) })
}

// Grow is the reaction to an SRQ-limit event that srq and bsrq share:
// post grow more buffers (the mechanism clamps to the queue's Max) and
// re-arm the limit at low. Other events ask for nothing.
func Grow(events []core.RecvEvent, out []core.RecvDecision, queues []core.QueueSpec, grow func(q core.QueueSpec) int) []core.RecvDecision {
	for _, ev := range events {
		if ev.Kind != core.RecvLimit || ev.Queue < 0 || int(ev.Queue) >= len(queues) {
			continue
		}
		q := queues[ev.Queue]
		if q.Kind != core.QueueShared {
			continue
		}
		if n := grow(q); n > 0 {
			out = append(out, core.RecvDecision{Kind: core.RecvGrow, Queue: ev.Queue, Value: int64(n)})
		}
		out = append(out, core.RecvDecision{Kind: core.RecvSetLimit, Queue: ev.Queue, Value: int64(q.Low)})
	}
	return out
}
