//go:build ofi && cgo

package ofi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/gobtl/gobtl/core"
	"github.com/gobtl/gobtl/internal/mptest"
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

func finAfterPut(t *testing.T, j *tjob, otherRail bool) {
	{
		{
			if !j.mods[0].attrs.Caps.Has(core.CapPut) {
				t.Fatalf("no Put (fin mode %s)", j.mods[0].finMode)
			}
			finFrom, finTo := j.mods[0], j.mods[1]
			if otherRail {
				if len(j.rails[0]) < 2 {
					t.Skip("a second domain is not there")
				}
				finFrom, finTo = j.rails[0][1], j.rails[1][1]
			}
			finEP, err := finFrom.Endpoint(1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("FIN by %s", j.mods[0].finMode)
			const size = 4 << 20
			target := make([]byte, size)
			rg, err := j.mods[1].RegisterMem(target, core.AccessRemoteWrite|core.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]byte, size)
			lrg, err := j.mods[0].RegisterMem(src, core.AccessRemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			var checked, bad int
			var why string
			finTo.Register(core.TypeRndvFin, func(h *core.Header, p []byte) {
				n, round := int(binary.LittleEndian.Uint32(p)), binary.LittleEndian.Uint64(p[4:])
				checked++
				if want := mptest.Fill(make([]byte, n), round); !bytes.Equal(target[:n], want) {
					bad++
					why = fmt.Sprintf("round %d: %d bytes, first difference at %d", round, n, firstDiff(target[:n], want))
				}
			})
			rounds := 0
			for _, n := range []int{1, 63, 4096, 65536, 1 << 20, size} {
				for range max(4, 64>>(n/65536)) {
					rounds++
					mptest.Fill(src[:n], uint64(rounds))
					done, pending := false, false
					var fin [12]byte
					binary.LittleEndian.PutUint32(fin[:], uint32(n))
					binary.LittleEndian.PutUint64(fin[4:], uint64(rounds))
					op := &core.RDMAOp{Local: src[:n], Region: lrg, Remote: rg.Key(), Done: doneFunc(func(_ *core.RDMAOp, err error) {
						if err != nil {
							t.Errorf("put: %v", err)
						}
						done = true
						// From inside Progress, at once: the FIN the PML sends
						// (or, refused for now, from its backlog right after).
						err = finEP.Send(core.Header{Type: core.TypeRndvFin}, fin[:], nil, 0)
						pending = errors.Is(err, core.ErrNoResources)
						if err != nil && !pending {
							t.Errorf("fin: %v", err)
						}
					})}
					j.rdma(0, 1, op, true)
					j.until("the put", func() bool { return done })
					for pending {
						err := finEP.Send(core.Header{Type: core.TypeRndvFin}, fin[:], nil, 0)
						pending = errors.Is(err, core.ErrNoResources)
						if err != nil && !pending {
							t.Fatal(err)
						}
						j.progress()
					}
					j.until("its fin", func() bool { return checked == rounds })
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d frames after a put found its bytes missing: %s", bad, rounds, why)
			}
			t.Logf("%d puts, each followed by a frame that found its bytes", rounds)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
