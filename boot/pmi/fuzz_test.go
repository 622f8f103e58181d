package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// FuzzResponse feeds arbitrary bytes to the response reader of both wires:
// it must never panic, and what it accepts must encode and read back the
// same.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n",
		"cmd=get_result rc=0 msg=success value=abc\n",
		"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
		"62    cmd=fullinit-response;rc=0;pmi-version=2;rank=1;size=4;appnum=-1;",
		"    45cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,2,2));rc=0;",
		"12    cmd=x;a=b;;c",
		"cmd=x a\n",
		"999999cmd=",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ver := range []int{1, 2} {
			m, err := readMsg(bufio.NewReader(bytes.NewReader(data)), ver)
			if err != nil {
				continue
			}
			enc, err := appendMsg(nil, m, ver)
			if err != nil {
				t.Fatalf("PMI-%d: %q was read as %v, which does not encode: %v", ver, data, m, err)
			}
			back, err := readMsg(bufio.NewReader(bytes.NewReader(enc)), ver)
			if err != nil || !reflect.DeepEqual(back, m) {
				t.Fatalf("PMI-%d: %v encodes as %q, which reads back as %v, %v", ver, m, enc, back, err)
			}
		}
	})
}

// FuzzMapping: the process mapping parser never panics, and a mapping it
// accepts places every rank on a node.
func FuzzMapping(f *testing.F) {
	for _, s := range []string{"(vector,(0,2,2))", "(vector,(0,4,1),(2,1,3))", "(vector,(0,1,0))", "(vector,", "(vector,(1,2))"} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, size int) {
		if size < 1 || size > 1000 {
			return
		}
		m, err := parseMapping(s, size)
		if err != nil {
			return
		}
		if err := m.Check(size); err != nil {
			t.Fatalf("%q for %d ranks gave %v: %v", s, size, m, err)
		}
	})
}

func TestMessagesThatCannotTravelAreRefused(t *testing.T) {
	for _, tc := range []struct {
		m   msg
		ver int
	}{
		{msg{"put", []arg{{"value", "a b"}}}, 1},
		{msg{"kvs-put", []arg{{"value", "a;b"}}}, 2},
		{msg{"put", []arg{{"value", "a\nb"}}}, 2},
		{msg{"put", []arg{{"k=y", "v"}}}, 2},
		{msg{"", nil}, 1},
	} {
		if b, err := appendMsg(nil, tc.m, tc.ver); !errors.Is(err, errWire) {
			t.Errorf("PMI-%d: %v encoded as %q", tc.ver, tc.m, b)
		}
	}
}

func TestBlobsSurviveChunkingAtEveryLength(t *testing.T) {
	for n := 0; n < 3000; n += 97 {
		puts := []put{{"a", bytes.Repeat([]byte{0xff, 0, ';', ' '}, n)}, {"", nil}, {"btl.sm.local", []byte(fmt.Sprint(n))}}
		chunks := chunkBlob(encodeBlob(puts), 100)
		count, first, err := chunkCount(chunks[0])
		if err != nil || count != len(chunks) {
			t.Fatalf("%d: head %q: %d, %v", n, chunks[0], count, err)
		}
		for _, c := range chunks {
			if len(c) > 100 || !validValue(c, 1) || !validValue(c, 2) {
				t.Fatalf("%d: chunk %q cannot travel", n, c)
			}
		}
		blob, err := joinChunks(append([]string{first}, chunks[1:]...))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]byte{}
		if err := decodeBlob(blob, got); err != nil {
			t.Fatal(err)
		}
		for _, p := range puts {
			if !bytes.Equal(got[p.key], p.value) {
				t.Fatalf("%d: %q came back as %d bytes, want %d", n, p.key, len(got[p.key]), len(p.value))
			}
		}
	}
	if err := decodeBlob([]byte{5, 'a'}, map[string][]byte{}); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("a truncated blob: %v", err)
	}
}
