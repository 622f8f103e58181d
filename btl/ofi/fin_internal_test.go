//go:build ofi && cgo

package ofi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/msgtest"
)

// TestAFrameSentAfterAPutFindsThePutsBytes is the rdma_write protocol's
// FIN, many times and at several sizes: rank 0 writes into rank 1's
// memory, and as soon as the write completes (RDMADone) sends a frame;
// rank 1's handler checks, on that frame's arrival, that every byte of
// the write is there. Rank 1 never reads its memory otherwise, so a
// write that completed at its initiator before its bytes landed fails
// the check. Each round writes a new pattern over the last.
//
// The providers here keep one ordered stream per pair of endpoints (a
// TCP connection, shm's command queue), so a frame after a write stays
// after it however early the write says it is done; a frame on another
// rail does not. So the test runs twice: the frame on the write's own
// module, as the PML sends its FIN, and on a second module over another
// domain (tcp and sockets: lo and eth0), which only a write whose
// completion means delivery passes. (Completing writes at once instead
// fails the second: checked when this test was written.)
func TestAFrameSentAfterAPutFindsThePutsBytes(t *testing.T) {
	for _, prov := range providersHere {
		for _, rail := range []string{"same rail", "other rail"} {
			t.Run(prov+"/"+rail, func(t *testing.T) {
				var params map[string]string
				if rail == "other rail" {
					if prov == "shm" {
						t.Skip("shm has one domain")
					}
					params = map[string]string{"if_include": "lo,eth0"}
				}
				finAfterPut(t, openTestJob(t, prov, 2, params), rail == "other rail")
			})
		}
	}
}

// finRig is a FIN test's two sides: the write's source and target, and
// the endpoint the FIN goes on.
type finRig struct {
	j            *tjob
	src, target  []byte
	lrg, rrg     core.Region
	finEP        core.Endpoint
	checked, bad int
	why          string
}

func newFinRig(t *testing.T, j *tjob, otherRail bool) *finRig {
	if j.mods[0].finMode == "none" {
		t.Fatalf("no Put (fin mode %s)", j.mods[0].finMode)
	}
	finFrom, finTo := j.mods[0], j.mods[1]
	if otherRail {
		if len(j.rails[0]) < 2 {
			t.Skip("a second domain is not there")
		}
		finFrom, finTo = j.rails[0][1], j.rails[1][1]
	}
	r := &finRig{j: j, src: make([]byte, 4<<20), target: make([]byte, 4<<20)}
	var err error
	if r.finEP, err = finFrom.Endpoint(1); err != nil {
		t.Fatal(err)
	}
	if r.rrg, err = j.mods[1].RegisterMem(r.target, core.AccessRemoteWrite|core.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if r.lrg, err = j.mods[0].RegisterMem(r.src, core.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	finTo.Register(core.TypeRndvFin, func(h *core.Header, p []byte) {
		n, round := int(binary.LittleEndian.Uint32(p)), binary.LittleEndian.Uint64(p[4:])
		r.checked++
		if want := msgtest.Fill(make([]byte, n), round); !bytes.Equal(r.target[:n], want) {
			r.bad++
			r.why = fmt.Sprintf("round %d: %d bytes, first difference at %d", round, n, firstDiff(r.target[:n], want))
		}
	})
	return r
}

// sendFin sends the FIN, reporting whether it must be sent again
// (refused for now: the PML would send it from its backlog).
func (r *finRig) sendFin(t *testing.T, fin []byte) bool {
	err := r.finEP.Send(core.Header{Type: core.TypeRndvFin}, fin, nil, 0)
	if err != nil && !errors.Is(err, core.ErrNoResources) {
		t.Errorf("fin: %v", err)
	}
	return errors.Is(err, core.ErrNoResources)
}

// round writes n bytes of pattern round and, from inside the Progress
// that completes the write, sends the FIN.
func (r *finRig) round(t *testing.T, n, round int) {
	j := r.j
	msgtest.Fill(r.src[:n], uint64(round))
	var fin [12]byte
	binary.LittleEndian.PutUint32(fin[:], uint32(n))
	binary.LittleEndian.PutUint64(fin[4:], uint64(round))
	done, pending := false, false
	op := &core.RDMAOp{Local: r.src[:n], Region: r.lrg, Remote: r.rrg.Key(), Done: doneFunc(func(_ *core.RDMAOp, err error) {
		if err != nil {
			t.Errorf("put: %v", err)
		}
		done = true
		pending = r.sendFin(t, fin[:])
	})}
	j.rdma(0, 1, op, true)
	j.until("the put", func() bool { return done })
	for pending {
		j.progress()
		pending = r.sendFin(t, fin[:])
	}
	j.until("its fin", func() bool { return r.checked == round })
}

func finAfterPut(t *testing.T, j *tjob, otherRail bool) {
	r := newFinRig(t, j, otherRail)
	t.Logf("FIN by %s", j.mods[0].finMode)
	rounds := 0
	for _, n := range []int{1, 63, 4096, 65536, 1 << 20, len(r.src)} {
		for range max(4, 64>>(n/65536)) {
			rounds++
			r.round(t, n, rounds)
		}
	}
	if r.bad > 0 {
		t.Fatalf("%d of %d frames after a put found its bytes missing: %s", r.bad, rounds, r.why)
	}
	t.Logf("%d puts, each followed by a frame that found its bytes", rounds)
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
