package core

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	in := Header{Type: TypeRndvStart, Flags: FlagBacklog, Src: 7, Context: 3, Tag: -5, PSN: 1 << 31, Length: 4, Credits: 65535}
	buf := make([]byte, HeaderSize+4)
	in.Encode(buf)
	var out Header
	if err := out.Decode(buf, FrameLimits{Size: 8}); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

// EagerWords encode the very bytes Encode writes for the same EAGER
// header, over bytes that held another frame, as PutEagerHeader does, and
// EagerMatch reads the fields back; Encode, which goes through Words, decodes to what it was
// given (TestHeaderRoundTrip) and puts each field at its offset.
func TestEagerWordsEncodeWhatEncodeWrites(t *testing.T) {
	for _, h := range []Header{
		{Type: TypeEager, Src: 3, Context: 7, Tag: 1<<31 - 1, PSN: 1<<32 - 1, Length: 8},
		{Type: TypeEager, Src: 0, Context: 1 << 16, Tag: 0, PSN: 0, Length: 0},
	} {
		want := make([]byte, HeaderSize+int(h.Length))
		h.Encode(want)
		if want[offVersion] != HeaderVersion || want[offType] != byte(TypeEager) || binary.LittleEndian.Uint32(want[offSrc:]) != uint32(h.Src) ||
			binary.LittleEndian.Uint32(want[offTag:]) != uint32(h.Tag) || binary.LittleEndian.Uint32(want[offLength:]) != h.Length {
			t.Fatalf("Encode(%+v) = %x: a field is not at its offset", h, want)
		}
		got := make([]byte, len(want))
		for i := range got {
			got[i] = 0xA5 // stale bytes of an earlier frame
		}
		clear(got[HeaderSize:])
		PutWords(got, EagerWords(h.Src, h.Context, h.Tag, h.PSN, int(h.Length)))
		if string(got) != string(want) {
			t.Fatalf("EagerWords(%+v) = %x, Encode = %x", h, got, want)
		}
		direct := make([]byte, len(want))
		for i := range direct {
			direct[i] = 0xA5
		}
		clear(direct[HeaderSize:])
		PutEagerHeader((*[HeaderSize]byte)(direct), h.Src, h.Context, h.Tag, h.PSN, int(h.Length))
		if string(direct) != string(want) {
			t.Fatalf("PutEagerHeader(%+v) = %x, Encode = %x", h, direct, want)
		}
		hb := (*[HeaderSize]byte)(got)
		tag, n, ok := EagerMatch(hb, h.Src, h.Context, h.PSN, len(got))
		if !ok || tag != h.Tag || n != int(h.Length) {
			t.Fatalf("EagerMatch = %d %d %v, want %+v", tag, n, ok, h)
		}
		for _, c := range []struct {
			what     string
			src      int32
			ctx, psn uint32
			frameLen int
		}{
			{"a frame one byte short of its payload", h.Src, h.Context, h.PSN, len(got) - 1},
			{"another source", h.Src + 1, h.Context, h.PSN, len(got)},
			{"another context", h.Src, h.Context + 1, h.PSN, len(got)},
			{"another PSN", h.Src, h.Context, h.PSN + 1, len(got)},
		} {
			if _, _, ok := EagerMatch(hb, c.src, c.ctx, c.psn, c.frameLen); ok {
				t.Fatalf("EagerMatch accepted %+v for %s", h, c.what)
			}
		}
		for _, o := range []int{offType, offFlags, offCredits, offCredits + 2} {
			bad := append([]byte(nil), got...)
			bad[o]++
			if _, _, ok := EagerMatch((*[HeaderSize]byte)(bad), h.Src, h.Context, h.PSN, len(bad)); ok {
				t.Fatalf("EagerMatch accepted %+v with byte %d changed", h, o)
			}
		}
	}
}

func TestHeaderDecodeRejects(t *testing.T) {
	good := func() []byte {
		b := make([]byte, HeaderSize+8)
		h := Header{Type: TypeEager, Src: 1, Length: 8}
		h.Encode(b)
		return b
	}
	tests := []struct {
		name  string
		mut   func(b []byte) []byte
		field string
	}{
		{"a short frame is rejected", func(b []byte) []byte { return b[:HeaderSize-1] }, "length"},
		{"a wrong version is rejected", func(b []byte) []byte { b[0] = 9; return b }, "version"},
		{"type zero is rejected", func(b []byte) []byte { b[1] = 0; return b }, "type"},
		{"a type in the reserved gap is rejected", func(b []byte) []byte { b[1] = 40; return b }, "type"},
		{"unknown flag bits are rejected", func(b []byte) []byte { b[3] = 0x80; return b }, "flags"},
		{"a source beyond the job is rejected", func(b []byte) []byte { b[4] = 200; return b }, "src"},
		{"a length beyond the buffer is rejected", func(b []byte) []byte { b[20] = 9; return b }, "length"},
		{"a length beyond the maximum is rejected", func(b []byte) []byte { return append(b, make([]byte, 100)...) }, ""},
		{"non-zero reserved bytes are rejected", func(b []byte) []byte { b[30] = 1; return b }, "reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mut(good())
			if tc.field == "" { // grow length beyond MaxPayload
				b[20] = 100
			}
			var h Header
			err := h.Decode(b, FrameLimits{Size: 4, MaxPayload: 64})
			var fe *FrameError
			if !errors.As(err, &fe) || !errors.Is(err, ErrBadFrame) {
				t.Fatalf("err = %v, want a FrameError", err)
			}
			want := tc.field
			if want == "" {
				want = "length"
			}
			if fe.Field != want {
				t.Fatalf("field = %q, want %q (%v)", fe.Field, want, err)
			}
		})
	}
}

func TestDispatchUnknownTypeIsBadFrame(t *testing.T) {
	var hs Handlers
	got := 0
	if err := hs.Register(TypeEager, func(*Header, []byte) { got++ }); err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(TypeEager, func(*Header, []byte) {}); err == nil {
		t.Fatal("second registration of a type succeeded")
	}
	if err := hs.Dispatch(&Header{Type: TypeEager}, nil); err != nil || got != 1 {
		t.Fatalf("dispatch: err %v, calls %d", err, got)
	}
	if err := hs.Dispatch(&Header{Type: TypeFrag}, nil); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("dispatch of an unregistered type: %v", err)
	}
}

func TestMemKeyRoundTrip(t *testing.T) {
	k := MemKey{Addr: 1, Len: 2, Key: 3, Aux: 4}
	b := make([]byte, MemKeySize)
	k.Encode(b)
	got, err := DecodeMemKey(b)
	if err != nil || got != k {
		t.Fatalf("got %+v %v", got, err)
	}
	if _, err := DecodeMemKey(b[:5]); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("short key: %v", err)
	}
}

// FuzzHeaderDecode checks that no input panics the decoder, that its
// fast path accepts exactly what the field-by-field check accepts, and
// that every accepted header survives a round trip.
func FuzzHeaderDecode(f *testing.F) {
	b := make([]byte, HeaderSize+3)
	(&Header{Type: TypeEager, Src: 1, Length: 3}).Encode(b)
	f.Add(b)
	f.Add([]byte{1, 2, 3})
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h, slow Header
		lim := FrameLimits{Size: 16, MaxPayload: 1 << 16}
		err := h.Decode(data, lim)
		if serr := slow.decodeSlow(data, lim); (err == nil) != (serr == nil) || err == nil && h != slow {
			t.Fatalf("the combined check and the field-by-field one disagree: %+v, %v vs %+v, %v", h, err, slow, serr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v is not ErrBadFrame", err)
			}
			return
		}
		if int(h.Src) >= 16 || int(h.Length) > len(data)-HeaderSize {
			t.Fatalf("accepted an impossible header %+v", h)
		}
		out := make([]byte, HeaderSize)
		h.Encode(out)
		var again Header
		if err := again.Decode(append(out, data[HeaderSize:]...), FrameLimits{Size: 16}); err != nil || again != h {
			t.Fatalf("round trip: %+v vs %+v (%v)", again, h, err)
		}
	})
}
