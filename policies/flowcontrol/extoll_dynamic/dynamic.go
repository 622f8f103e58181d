// Package extolldynamic (directory extoll_dynamic) is the dynamic credit
// flow control of seed 003 §6 for the EXTOLL BTL's VELO mailbox: the
// policy half, which watches how active each sender is and moves credit
// quota from idle senders to busy ones.
//
// The mailbox keeps the static scheme's credit region; of its data region
// only the static region — credit_slots per sender, the least quota a
// sender ever has (Equation 2) — is handed out at start. The rest, the
// dynamic region, is granted at run time: each sender has an intended
// credit quota (at first an equal share of the data region), and the
// mechanism in btl/extoll/velo returns credits by Equation 1 applied to
// it, out of a shared pool of free slots.
//
// A sender reaches a monitoring point when it has used the credits granted
// since the last one (every credit_slots+1 thresholds, §6.4). The receiver
// keeps its senders in four activity lists — high, medium, low and null —
// and at a monitoring point (Figure 12) promotes the sender one list up.
// A sender already in the high list (or in the null list, which is treated
// the same, so that a sender reduced to its static slots recovers fast)
// goes to the front of the high list, after the lists shift down a level
// if the low list is empty, and then steals from the oldest sender of the
// low list (Figure 13):
//
//	cred = max(credit_slots + 1, |cq_mon - cq_vic| div 2)   (Equation 6)
//
// never taking the victim below its static slots. A victim left with only
// its static slots moves to the null list and is asked, by a compulsory
// credit return request, to give back the credits it holds beyond them;
// otherwise it moves to the front of the medium list, so that the next
// steal takes from another low-activity sender.
//
// The policy proposes quota changes (FlowSetQuota for the victim, then
// for the monitored sender) and reclaims (FlowReclaim); the mechanism
// checks each one — the victim keeps its static slots, quota grows only
// out of unassigned slots, a reclaim goes out only to a sender holding
// more than its quota and not already asked — and answers every
// FlowSetQuota, in order, with a FlowQuota carrying the quota it set.
//
// The policy's copy of a sender's quota is the quota it will have once
// every proposal made so far is applied. The paper's invariant (§6.2:
// the intended quotas add up to the data region) is kept on that copy,
// and since the mechanism applies decisions in the order proposed, with
// a victim's cut before the thief's raise, every state the mechanism
// passes through on the way holds no more than the data region either.
// Built in, decisions are applied before the next event is raised; as a
// plugin they reach the engine a round trip after the events they answer,
// and a monitoring point raised meanwhile carries the quota from before
// them. Taking that as the copy (as this policy did) made every later
// steal start from the old quota — the victim lost slots each time, the
// thief gained them once — and on two ranks the busy sender's quota
// peaked at 68 of 110 slots, the rest assigned to nobody. So a
// sender's quota is taken from an event only while no proposal for it is
// unanswered: a FlowQuota answering its last one (applied or clamped), or
// a monitoring point after that. Slots nobody holds (a clamped raise) go
// to the next thief, and a copy that counts more than the data region (a
// fallback policy resyncing from a diverged engine) raises the next thief
// by less, so the data region is never promised twice.
//
// Once one sender is left busy and the others are reduced to their static
// slots (two ranks settle so within a few monitoring points), the busy
// sender's monitoring points change nothing; the policy then says so with
// a FlowQuiet after each batch, and a plugin host stops sending them until
// something else happens — built in, the engine ignores the statement.
//
// Pure logic: no I/O, no goroutines, no clock.
package extolldynamic

import (
	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/policies/flowcontrol/internal/mailboxsplit"
)

// Name is the component name.
const Name = "extoll_dynamic"

// Activity lists.
const (
	High = iota
	Medium
	Low
	Null
	lists
)

// The two ends of a list.
const (
	front = iota
	back
)

// Policy is the dynamic scheme's control: activity lists and stealing.
type Policy struct {
	// CreditSlots per peer (§7: 2); also each sender's static slots.
	CreditSlots int
	// MaxQuota caps a sender's quota when positive (§7.4.1 tried 62).
	MaxQuota int

	static   int
	data     int // the data region
	intended []int
	sum      int // of intended
	// unanswered counts each sender's FlowSetQuota proposals the engine
	// has not yet answered with a FlowQuota: while it is not zero, an
	// event's quota predates a proposal and says nothing about the quota
	// the sender will have.
	unanswered []int32
	// Four intrusive doubly linked lists over the senders, with the role
	// of the three activity lists rotating when they shift (level maps a
	// role to a list). Both directions are stored alike, indexed by end:
	// link[front][s] is s's neighbour towards the front (its prev),
	// link[back][s] towards the back (its next); ends[front][l] is list
	// l's head, ends[back][l] its tail. So one push serves both ends.
	link  [2][]int32
	ends  [2][lists]int32
	in    []uint8
	level [lists]uint8

	// Steals, Stolen and Reclaims count what the policy proposed.
	Steals, Stolen, Reclaims int
}

// Setup gives every sender an equal intended quota and puts all of them in
// the low list, in increasing rank order (§6.3).
func (p *Policy) Setup(info core.FlowInfo) (core.FlowSetup, error) {
	quota, data, err := mailboxsplit.Quota(Name, info, p.CreditSlots)
	if err != nil {
		return core.FlowSetup{}, err
	}
	k, n := p.CreditSlots, info.Ranks
	maxQuota := data // a sender may come to hold the whole data region
	if p.MaxQuota > 0 {
		quota = min(quota, max(p.MaxQuota, k))
		maxQuota = p.MaxQuota
	}
	p.static, p.data = k, data
	p.intended, p.sum = make([]int, n), n*quota
	p.unanswered = make([]int32, n)
	p.link = [2][]int32{make([]int32, n), make([]int32, n)}
	p.in = make([]uint8, n)
	for l := range lists {
		p.ends[front][l], p.ends[back][l], p.level[l] = -1, -1, uint8(l)
	}
	for i := range n {
		p.intended[i] = quota
		p.push(p.list(Low), i, back)
	}
	return core.FlowSetup{Scheme: core.FlowCredits, CreditSlots: k, DynamicRegion: true, Quota: quota, MaxQuota: maxQuota}, nil
}

// Observe runs the activity control of Figures 12 and 13 for each
// monitoring point in the batch.
func (p *Policy) Observe(events []core.FlowEvent, out []core.FlowDecision) []core.FlowDecision {
	for _, ev := range events {
		s := int(ev.Peer)
		if s < 0 || s >= len(p.intended) {
			continue
		}
		switch ev.Kind {
		case core.FlowQuota:
			// An answer; with none outstanding (a fallback policy hearing
			// the answers to its plugin's proposals) a resync all the same.
			if p.unanswered[s] > 0 {
				p.unanswered[s]--
			}
			p.resync(s, ev.Quota)
		case core.FlowMonitor:
			p.resync(s, ev.Quota)
			out = p.monitor(s, out)
		}
	}
	if len(events) > 0 {
		out = p.quiet(out)
	}
	return out
}

// quiet states (core.FlowQuiet) the monitoring points that change
// nothing: once every sender but m is in the null list and m is in the
// high list with no proposal unanswered, m's monitoring point shifts three
// empty-but-for-m lists back to where they were, finds no victim and
// resyncs m's quota to itself. That is where two ranks settle, and where a
// job with one busy sender settles; a plugin host then stops sending the
// busy sender's monitoring points until something else happens.
func (p *Policy) quiet(out []core.FlowDecision) []core.FlowDecision {
	high := p.list(High)
	m := p.ends[front][high]
	if m < 0 || p.ends[back][high] != m || p.ends[front][p.list(Medium)] >= 0 ||
		p.ends[front][p.list(Low)] >= 0 || p.unanswered[m] != 0 {
		return out
	}
	return append(out, core.FlowDecision{Kind: core.FlowQuiet, Peer: m, Value: int64(p.intended[m])})
}

// resync takes the engine's quota of s as the copy if nothing proposed
// for s is unanswered.
func (p *Policy) resync(s int, quota int32) {
	if p.unanswered[s] == 0 {
		p.set(s, int(quota))
	}
}

func (p *Policy) set(s, quota int) {
	p.sum += quota - p.intended[s]
	p.intended[s] = quota
}

// monitor is Figure 12.
func (p *Policy) monitor(m int, out []core.FlowDecision) []core.FlowDecision {
	switch p.role(m) {
	case Low:
		p.moveFront(p.list(Medium), m)
		return out
	case Medium:
		p.moveFront(p.list(High), m)
		return out
	}
	// High, or Null — treated as high so that it recovers credits quickly.
	if p.ends[front][p.list(Low)] < 0 {
		// Shift: high becomes medium, medium becomes low, a new empty
		// high list (the empty low list) takes the top.
		p.level[High], p.level[Medium], p.level[Low] = p.level[Low], p.level[High], p.level[Medium]
	}
	p.moveFront(p.list(High), m)
	return p.steal(m, out)
}

// steal is Figure 13: take from the oldest low-activity sender.
func (p *Policy) steal(m int, out []core.FlowDecision) []core.FlowDecision {
	low := p.list(Low)
	v := int(p.ends[back][low])
	if v < 0 {
		return out
	}
	cm, cv := p.intended[m], p.intended[v]
	cred := max(p.CreditSlots+1, abs(cm-cv)/2) // Equation 6
	cred = min(cred, cv-p.static)              // never the static slots
	// The thief gains the victim's slots plus those nobody holds, or less
	// by what the copy over-counts; the victim gives no more than it
	// takes to reach the cap.
	free := p.data - p.sum
	gain := cred + free
	if p.MaxQuota > 0 && gain > p.MaxQuota-cm {
		gain = max(p.MaxQuota-cm, 0)
		cred = max(min(cred, gain-free), 0)
	}
	gain = max(gain, 0)
	if cred > 0 {
		p.set(v, cv-cred)
		p.Steals++
		p.Stolen += cred
		out = p.propose(v, out)
	}
	if gain > 0 {
		p.set(m, cm+gain)
		out = p.propose(m, out)
	}
	if p.intended[v] <= p.static {
		// Nothing left to give: to the null list, and ask for the credits
		// it still holds beyond its quota (the mechanism sends the request
		// only if it holds more).
		p.moveFront(p.list(Null), v)
		p.Reclaims++
		return append(out, core.FlowDecision{Kind: core.FlowReclaim, Peer: int32(v)})
	}
	p.moveFront(p.list(Medium), v)
	return out
}

// propose asks for s's quota to be the copy's. The victim's cut goes
// before the thief's raise: applied in order, no state between them holds
// more than the data region.
func (p *Policy) propose(s int, out []core.FlowDecision) []core.FlowDecision {
	p.unanswered[s]++
	return append(out, core.FlowDecision{Kind: core.FlowSetQuota, Peer: int32(s), Value: int64(p.intended[s])})
}

// Role returns the activity list a sender is in (High, Medium, Low, Null).
func (p *Policy) Role(s int) int { return p.role(s) }

// Intended returns the policy's copy of a sender's intended quota.
func (p *Policy) Intended(s int) int { return p.intended[s] }

// Members lists a role's senders from front to back.
func (p *Policy) Members(role int) []int {
	var out []int
	for i := p.ends[front][p.list(role)]; i >= 0; i = p.link[back][i] {
		out = append(out, int(i))
	}
	return out
}

// list is the physical list that plays role.
func (p *Policy) list(role int) int { return int(p.level[role]) }

func (p *Policy) role(s int) int {
	for r := range lists {
		if p.level[r] == p.in[s] {
			return r
		}
	}
	panic("unreachable")
}

// unlink takes s out of its list.
func (p *Policy) unlink(s int) {
	l := p.in[s]
	for e := range 2 {
		// The neighbour towards end e now links past s; without one, s
		// was that end and its other neighbour takes its place.
		if n := p.link[e][s]; n >= 0 {
			p.link[1-e][n] = p.link[1-e][s]
		} else {
			p.ends[e][l] = p.link[1-e][s]
		}
	}
}

func (p *Policy) moveFront(l, s int) {
	p.unlink(s)
	p.push(l, s, front)
}

// push puts s, in no list, at end e (front or back) of list l.
func (p *Policy) push(l, s, e int) {
	p.in[s] = uint8(l)
	p.link[e][s], p.link[1-e][s] = -1, p.ends[e][l]
	if p.ends[e][l] >= 0 {
		p.link[e][p.ends[e][l]] = int32(s)
	} else {
		p.ends[1-e][l] = int32(s)
	}
	p.ends[e][l] = int32(s)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Params is the schema of the policy's HCL block.
var Params = []core.Param{
	mailboxsplit.CreditSlotsParam,
	{Name: "max_quota", Type: core.ParamInt, Default: "0", Doc: "most slots one sender's quota may grow to; 0 means no cap but the data region (seed 003 §7.4.1 tried 62)", Min: "0"},
}

func init() {
	mailboxsplit.Register(Name,
		"EXTOLL dynamic credit flow control (seed 003 §6): static plus dynamic region, activity lists, credit stealing by Equation 6, compulsory credit returns.",
		Params, func(p core.Params) core.FlowControl {
			return &Policy{CreditSlots: p.Int("credit_slots"), MaxQuota: p.Int("max_quota")}
		})
}
