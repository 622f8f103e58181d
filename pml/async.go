package pml

import "sync"

// asyncProgress is the event-driven progress of rdma_read_async (seed 004
// §4.3). A goroutine sleeps until a module with a core.Notifier signals a
// solicited event — a RNDV_START, or the completion of a read — and then
// drains every module under the engine lock until nothing is left, so
// back-to-back events cost one wake-up (interrupt suppression). It re-arms
// the notifiers only while receives are pending or reads are in flight
// (dynamic interrupt requests): with nothing pending, progress is polled
// by the application's own calls, as without events.
//
// It also arms them while a rendezvous send waits for the receiver to
// read it: arming a CQ tells a software device (softrc) that nobody polls
// and its NIC goroutine must serve the wire now, so that the receiver's
// reads are answered while the sender computes, as an HCA answers them
// (seed 004 §5.1's sender overlap), instead of once the device has seen
// no poll for its idle_after, a Go timer that fired a millisecond and
// more late.
type asyncProgress struct {
	e       *engine
	wake    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	armed   bool
	wakeups int64
}

func startAsync(e *engine) *asyncProgress {
	a := &asyncProgress{e: e, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	var chans []<-chan struct{}
	for _, m := range e.mods {
		if m.notifier != nil {
			chans = append(chans, m.notifier.Notify())
		}
	}
	wake := (<-chan struct{})(a.wake)
	if len(chans) == 1 {
		// One module raises events: wait on it directly, one goroutine
		// hop from the event to the drain.
		wake = chans[0]
	} else {
		for _, ch := range chans {
			a.wg.Add(1)
			go a.forward(ch)
		}
	}
	a.wg.Add(1)
	go a.loop(wake)
	return a
}

// forward turns one module's notifications into a wake-up of the loop.
func (a *asyncProgress) forward(ch <-chan struct{}) {
	defer a.wg.Done()
	for {
		select {
		case <-a.stop:
			return
		case <-ch:
			select {
			case a.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (a *asyncProgress) loop(wake <-chan struct{}) {
	defer a.wg.Done()
	e := a.e
	for {
		select {
		case <-a.stop:
			return
		case <-wake:
		}
		e.mu.Lock()
		a.armed = false // the notification consumed the request
		a.wakeups++
		for e.progress() > 0 {
		}
		a.arm()
		e.mu.Unlock()
	}
}

// arm requests notifications if work is pending (engine lock held).
func (a *asyncProgress) arm() {
	e := a.e
	if a.armed || (e.pendingRecvs == 0 && e.pendingWork == 0 && !e.rndv.readsInFlight()) {
		return
	}
	for _, m := range e.mods {
		if m.notifier != nil {
			m.notifier.Arm()
		}
	}
	a.armed = true
}

func (a *asyncProgress) close() {
	close(a.stop)
	a.wg.Wait()
}

// readsInFlight reports whether any subchannel has reads outstanding, as
// the reader or as the sender whose memory a peer reads.
func (rv *rendezvous) readsInFlight() bool {
	for _, r := range rv.e.reqs {
		if r.done {
			continue
		}
		if r.kind == reqRecv && r.x != nil && r.x.stripes > 0 || r.kind == reqSend && r.proto == ProtoReadAsync {
			return true
		}
	}
	return false
}
