package verbs

import (
	"sync"
	"testing"
	"time"
)

func TestRNRTimerCodesFollowTheIBATable(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		code uint8
	}{
		{0, 1}, {10 * time.Microsecond, 1}, {11 * time.Microsecond, 2}, {100 * time.Microsecond, 7},
		{time.Millisecond, 14}, {491520 * time.Microsecond, 31}, {time.Second, 31},
	} {
		if got := RNRTimerCode(c.d); got != c.code {
			t.Errorf("RNRTimerCode(%v) = %d, want %d", c.d, got, c.code)
		}
	}
	if RNRTimer(0) != 655360*time.Microsecond || RNRTimer(1) != 10*time.Microsecond {
		t.Errorf("code 0 is %v and code 1 is %v", RNRTimer(0), RNRTimer(1))
	}
	for c := uint8(2); c < 32; c++ {
		if RNRTimer(c) <= RNRTimer(c-1) {
			t.Errorf("code %d (%v) is not longer than code %d", c, RNRTimer(c), c-1)
		}
	}
}

func TestAckTimeoutIsFourMicrosecondsTimesAPowerOfTwo(t *testing.T) {
	if AckTimeout(0) != 0 || AckTimeout(1) != 8192*time.Nanosecond || AckTimeout(14) != 4096*(1<<14)*time.Nanosecond {
		t.Errorf("AckTimeout: 0→%v 1→%v 14→%v", AckTimeout(0), AckTimeout(1), AckTimeout(14))
	}
}

func TestMTUCodes(t *testing.T) {
	if MTU256.Bytes() != 256 || MTU4096.Bytes() != 4096 || MTU(0).Bytes() != 0 || MTU(6).Bytes() != 0 {
		t.Error("MTU codes do not map to 256..4096")
	}
}

func TestAddrOfIsTheFirstBytesAddress(t *testing.T) {
	b := make([]byte, 16)
	if AddrOf(b[4:])-AddrOf(b) != 4 || AddrOf(nil) != 0 {
		t.Error("AddrOf does not follow the backing array")
	}
}

var registerOnce sync.Once

func TestUnknownProvidersAreNamedInTheError(t *testing.T) {
	registerOnce.Do(func() { RegisterProvider("verbs-test", func(string) (Provider, error) { return nil, nil }) })
	if _, err := OpenProvider("nope", ""); err == nil {
		t.Fatal("an unknown provider opened")
	}
	defer func() {
		if recover() == nil {
			t.Error("a duplicate provider registered")
		}
	}()
	RegisterProvider("verbs-test", func(string) (Provider, error) { return nil, nil })
}
