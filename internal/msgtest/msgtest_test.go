package msgtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCheckNamesTheFirstWrongByte(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 4096 + 3} {
		b := Fill(make([]byte, n), 42)
		if err := Check(b, 42); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if n == 0 {
			continue
		}
		if err := Check(b, 43); err == nil {
			t.Errorf("%d bytes pass as another seed's payload", n)
		}
		b[n-1] ^= 1
		if err := Check(b, 42); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("byte %d of %d", n-1, n)) {
			t.Errorf("%d bytes, last flipped: %v", n, err)
		}
	}
}

func TestPollGivesUpAtItsDeadline(t *testing.T) {
	calls := 0
	err := Poll("never", 20*time.Millisecond, func() bool { return false }, func() int { calls++; return 0 })
	if err == nil || !strings.Contains(err.Error(), "waiting for never") || calls == 0 {
		t.Fatalf("err %v after %d progress calls", err, calls)
	}
	n := 0
	if err := Poll("three looks", time.Second, func() bool { n++; return n == 3 }); err != nil {
		t.Fatal(err)
	}
}

func TestJobIDsAreFreshAndNameable(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := JobID()
		if len(id) != 13 || id[0] != 't' || strings.Trim(id[1:], "0123456789abcdef") != "" || seen[id] {
			t.Fatalf("job id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}
