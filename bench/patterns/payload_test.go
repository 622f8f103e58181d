package patterns

import (
	"errors"
	"testing"
)

func TestCheckNamesWhatWentWrong(t *testing.T) {
	msg := func(src, dst int, seq uint32, n int, kind byte) []byte {
		b := make([]byte, n)
		fill(b, src, dst, seq, kind)
		return b
	}
	flip := func(b []byte, i int) []byte { b[i] ^= 0x10; return b }
	tests := []struct {
		name   string
		got    []byte
		posted int
		want   uint32
		kind   byte
		err    error
	}{
		{"the message that is due passes", msg(3, 5, 7, 1000, kindData), 1000, 7, kindData, nil},
		{"an 8-byte message passes", msg(3, 5, 0, 8, kindData), 8, 0, kindData, nil},
		{"a length that is not a multiple of 8 passes", msg(3, 5, 2, 13, kindData), 13, 2, kindData, nil},
		{"the end-of-run marker with the count passes", msg(3, 5, 9, 8, kindFin), 8, 9, kindFin, nil},
		{"a later message means one was lost", msg(3, 5, 8, 1000, kindData), 1000, 7, kindData, ErrLost},
		{"the marker where data is due means the last was lost", msg(3, 5, 7, 8, kindFin), 1000, 7, kindData, ErrLost},
		{"a marker with a higher count means a loss", msg(3, 5, 10, 8, kindFin), 8, 9, kindFin, ErrLost},
		{"an earlier message is a duplicate", msg(3, 5, 6, 1000, kindData), 1000, 7, kindData, ErrDuplicate},
		{"data where the marker is due is a duplicate", msg(3, 5, 8, 8, kindData), 8, 9, kindFin, ErrDuplicate},
		{"a flipped body byte is corruption", flip(msg(3, 5, 7, 1000, kindData), 500), 1000, 7, kindData, ErrCorrupt},
		{"a flipped tail byte is corruption", flip(msg(3, 5, 7, 13, kindData), 12), 13, 7, kindData, ErrCorrupt},
		{"a flipped header byte is corruption", flip(msg(3, 5, 7, 1000, kindData), 5), 1000, 7, kindData, ErrCorrupt},
		{"a message for another rank is corruption", msg(3, 6, 7, 1000, kindData), 1000, 7, kindData, ErrCorrupt},
		{"a short message is corruption", msg(3, 5, 7, 999, kindData)[:500], 1000, 7, kindData, ErrCorrupt},
		{"fewer than 8 bytes is corruption", []byte{1, 2, 3}, 1000, 7, kindData, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.got, tc.posted, 3, 5, tc.want, tc.kind)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("check: %v, want %v", err, tc.err)
			}
		})
	}
}
