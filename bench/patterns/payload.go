package patterns

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors a receiver reports when a message is not the one the pattern
// expects next from that sender.
var (
	// ErrLost: a later message (or the sender's end-of-run marker) came
	// where an earlier one was due.
	ErrLost = errors.New("message lost")
	// ErrDuplicate: a message that was already delivered came again.
	ErrDuplicate = errors.New("message duplicated")
	// ErrCorrupt: the payload, its header or its length is not what the
	// sender wrote.
	ErrCorrupt = errors.New("message corrupted")
)

// MinSize is the smallest message a pattern sends: the 8-byte header of
// the checkable payload. NPB's 4-byte messages (IS's bucket counts) become
// 8 bytes.
const MinSize = 8

// Message kinds: pattern data, and the end-of-run marker each sender sends
// on every connection it used (see run.finish).
const (
	kindData byte = 1
	kindFin  byte = 2
)

// A payload is [seq uint32][key uint32][body], little endian. seq numbers
// the messages of one sender to one receiver from 0; key is a hash of
// (source, destination, seq, length, kind); the body is a xorshift stream
// seeded by the full 64-bit hash. The receiver recomputes all of it, so a
// message that is lost, duplicated, cut short, sent to the wrong rank or
// changed in any byte is caught.

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func key(src, dst int, seq uint32, n int, kind byte) uint64 {
	return mix(uint64(src)<<40 ^ uint64(dst)<<16 ^ uint64(kind) ^ mix(uint64(seq)<<32|uint64(uint32(n))))
}

// fill writes the payload of message seq from src to dst into b.
func fill(b []byte, src, dst int, seq uint32, kind byte) {
	k := key(src, dst, seq, len(b), kind)
	binary.LittleEndian.PutUint32(b[0:], seq)
	binary.LittleEndian.PutUint32(b[4:], uint32(k))
	x := k | 1
	i := 8
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	if i < len(b) {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := 0; i < len(b); i, j = i+1, j+1 {
			b[i] = byte(x >> (8 * j))
		}
	}
}

// check verifies that b, received from src at dst, is message want of kind
// with the length the receiver posted (posted); it names what went wrong.
func check(b []byte, posted, src, dst int, want uint32, kind byte) error {
	if len(b) < MinSize {
		return fmt.Errorf("%d-byte message where #%d of %d bytes was due: %w", len(b), want, posted, ErrCorrupt)
	}
	seq := binary.LittleEndian.Uint32(b[0:])
	k := binary.LittleEndian.Uint32(b[4:])
	switch {
	case len(b) == MinSize && k == uint32(key(src, dst, seq, MinSize, kindFin)):
		if kind == kindFin && seq == want {
			return nil
		}
		if kind == kindFin {
			return fmt.Errorf("the sender counts %d messages, this rank received %d: %w", seq, want, ErrLost)
		}
		return fmt.Errorf("the sender's end-of-run marker (it sent %d messages) came where message #%d was due: %w", seq, want, ErrLost)
	case k != uint32(key(src, dst, seq, len(b), kindData)):
		return fmt.Errorf("message #%d: header does not match its sender, seq or length (%d bytes): %w", want, len(b), ErrCorrupt)
	case kind == kindFin:
		return fmt.Errorf("message #%d came where the sender's end-of-run marker (after %d messages) was due: %w", seq, want, ErrDuplicate)
	case seq < want:
		return fmt.Errorf("message #%d came again where #%d was due: %w", seq, want, ErrDuplicate)
	case seq > want:
		return fmt.Errorf("message #%d came where #%d was due: %w", seq, want, ErrLost)
	case len(b) != posted:
		return fmt.Errorf("message #%d has %d bytes, the pattern posted %d: %w", seq, len(b), posted, ErrCorrupt)
	}
	x := uint64(key(src, dst, seq, len(b), kindData)) | 1
	i := 8
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if binary.LittleEndian.Uint64(b[i:]) != x {
			return corruptAt(b, src, dst, seq, i)
		}
	}
	if i < len(b) {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := 0; i < len(b); i, j = i+1, j+1 {
			if b[i] != byte(x>>(8*j)) {
				return corruptAt(b, src, dst, seq, i)
			}
		}
	}
	return nil
}

// checkLonger names what a message longer than the posted receive is,
// from the header in the bytes that fit (b): its length is unknown, so
// only its sequence number tells.
func checkLonger(b []byte, posted int, want uint32, kind byte) error {
	seq := binary.LittleEndian.Uint32(b)
	switch {
	case kind == kindFin:
		return fmt.Errorf("message #%d, longer than the end-of-run marker, came where the marker (after %d messages) was due: %w", seq, want, ErrDuplicate)
	case seq > want:
		return fmt.Errorf("message #%d came where #%d (%d bytes) was due: %w", seq, want, posted, ErrLost)
	case seq < want:
		return fmt.Errorf("message #%d came again where #%d was due: %w", seq, want, ErrDuplicate)
	}
	return fmt.Errorf("message #%d is longer than the %d bytes the pattern posted: %w", seq, posted, ErrCorrupt)
}

// corruptAt names the first wrong byte at or after offset off.
func corruptAt(b []byte, src, dst int, seq uint32, off int) error {
	ref := make([]byte, len(b))
	fill(ref, src, dst, seq, kindData)
	for off < len(b) && b[off] == ref[off] {
		off++
	}
	return fmt.Errorf("message #%d (%d bytes): byte %d is %#02x, the sender wrote %#02x: %w", seq, len(b), off, b[off], ref[off], ErrCorrupt)
}
