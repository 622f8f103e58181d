package msgtest

import (
	"encoding/binary"
	"fmt"
)

// Fill writes into b the payload of seed, a xorshift stream, and returns
// b. A test gives each message a seed of its own (its sender, receiver and
// number, say), so a message delivered with another's bytes, shifted, cut
// short or changed anywhere fails Check.
func Fill(b []byte, seed uint64) []byte {
	x := seed*0x9E3779B97F4A7C15 | 1
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x = next(x)
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	if i < len(b) {
		x = next(x)
		for j := 0; i < len(b); i, j = i+1, j+1 {
			b[i] = byte(x >> (8 * j))
		}
	}
	return b
}

func next(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// Check says whether b is the payload of seed, naming the first byte
// that is not.
func Check(b []byte, seed uint64) error {
	want := Fill(make([]byte, len(b)), seed)
	for i := range b {
		if b[i] != want[i] {
			return fmt.Errorf("byte %d of %d is %#02x, the payload of seed %#x has %#02x there", i, len(b), b[i], seed, want[i])
		}
	}
	return nil
}
