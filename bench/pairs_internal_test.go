package bench

import "testing"

func TestThePairsPayloadCatchesAChangedByteAndAnotherMessagesBytes(t *testing.T) {
	for _, n := range []int{1, 7, 8, 13, 4096} {
		b := make([]byte, n)
		pairsStream(b, pairsSeed(0, 1, n, 0), false)
		if i := pairsStream(b, pairsSeed(0, 1, n, 0), true); i >= 0 {
			t.Fatalf("%d bytes: the payload fails its own check at %d", n, i)
		}
		for _, other := range []uint64{pairsSeed(1, 0, n, 0), pairsSeed(0, 2, n, 0), pairsSeed(0, 1, n, 1), pairsSeed(0, 1, n+1, 0)} {
			if pairsStream(b, other, true) < 0 {
				t.Errorf("%d bytes: the payload passes as another message's (seed %#x)", n, other)
			}
		}
		b[n-1] ^= 1
		if i := pairsStream(b, pairsSeed(0, 1, n, 0), true); i != n-1 {
			t.Errorf("%d bytes: a changed last byte is found at %d", n, i)
		}
	}
}
