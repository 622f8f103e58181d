package boot_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gobtl/gobtl/boot"
)

// FuzzRequest feeds the launcher's side of the protocol — the line reader
// and the request decoder, what a process that reaches the socket
// controls — with arbitrary bytes: no panic, no line past the bound, and
// every request it accepts names a known operation.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"hello","rank":0,"job":"abc"}` + "\n",
		`{"op":"fence","rank":1,"puts":{"btl.sm.":"eyJob3N0Ijp7fX0="}}` + "\n" + `{"op":"abort","msg":"x"}` + "\n",
		`{"op":"hello","job":"` + "\n",
		`{"op":"nope"}` + "\n",
		"\n\n",
		`{"op":"fence","puts":{"k":"!!"}}`,
	} {
		f.Add([]byte(s))
	}
	const max = 64 // small, so that the fuzzer reaches the bound
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for {
			line, err := boot.ReadLine(br, max)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, boot.ErrLineTooLong) {
					t.Fatalf("ReadLine: %v", err)
				}
				return
			}
			if len(line) >= max || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("ReadLine returned %d bytes %q with a bound of %d", len(line), line, max)
			}
			req, err := boot.DecodeRequest(line)
			if err != nil {
				continue
			}
			switch req.Op {
			case boot.OpHello:
				if req.Job == "" {
					t.Fatalf("a hello without a job was accepted: %q", line)
				}
			case boot.OpFence, boot.OpAbort:
			default:
				t.Fatalf("request %q accepted with operation %q", line, req.Op)
			}
		}
	})
}

func TestReadLineStopsAtItsBound(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		end      error
	}{
		{"lines within the bound", "a\nbb\n", []string{"a", "bb"}, io.EOF},
		{"a line of exactly the bound with its newline", "abc\n", []string{"abc"}, io.EOF},
		{"a line one past the bound", "abcd\n", nil, boot.ErrLineTooLong},
		{"an endless line", "abcdefghijklmnop", nil, boot.ErrLineTooLong},
		{"a last line without a newline", "a\nb", []string{"a"}, io.ErrUnexpectedEOF},
	} {
		br := bufio.NewReaderSize(bytes.NewReader([]byte(tc.in)), 16)
		var got []string
		var err error
		for {
			var line []byte
			if line, err = boot.ReadLine(br, 4); err != nil {
				break
			}
			got = append(got, string(line))
		}
		if !errors.Is(err, tc.end) || len(got) != len(tc.want) {
			t.Errorf("%s: lines %q, end %v; want %q, %v", tc.name, got, err, tc.want, tc.end)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: line %d is %q, want %q", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}
