package gobtl

import "testing"

func TestRankListIsCompact(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{1, 2, 3}, "1-3"},
		{[]int{0, 2, 3, 5, 7, 8, 9}, "0,2-3,5,7-9"},
		{[]int{3, 1, 2, 2}, "1-3"},
	} {
		if got := rankList(tc.in); got != tc.want {
			t.Errorf("rankList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The dump of a rank inside gobtl.Init's fence, inside the PML's Recv,
// and outside gobtl altogether.
func TestBlockedInNamesTheCallAndItsCaller(t *testing.T) {
	const dump = `goroutine 7 [running]:
main.other()
	/x/other.go:3 +0x1

goroutine 1 [IO wait]:
internal/poll.runtime_pollWait(0x7f, 0x72)
	/go/src/runtime/netpoll.go:351 +0x85
github.com/gobtl/gobtl/boot.(*Client).roundTrip(0xc000, {0x1, 0x2}, 0xc0)
	/src/boot/client.go:200 +0x1
github.com/gobtl/gobtl/boot.(*Client).Fence(0xc000, {0x1, 0x2})
	/src/boot/client.go:130 +0x1
github.com/gobtl/gobtl.(*start).exchange(...)
	/src/start.go:140
github.com/gobtl/gobtl.Init({0x1, 0x2}, {0x0})
	/src/start.go:30 +0x1
main.main()
	/x/ring.go:20 +0x1
`
	if got, want := blockedIn(mainGoroutine([]byte(dump))), "gobtl.Init (inside boot.(*Client).Fence), called from main.main (/x/ring.go:20)"; got != want {
		t.Errorf("in Init: %q, want %q", got, want)
	}
	const recv = `goroutine 1 [sleep]:
time.Sleep(0x2710)
	/go/src/runtime/time.go:300 +0xf5
github.com/gobtl/gobtl/btl/sm.(*module).Progress(0xc0)
	/src/btl/sm/module.go:9 +0x1
github.com/gobtl/gobtl/pml.(*Comm).wait(0xc0, 0xc1, 0x0)
	/src/pml/comm.go:224 +0x1
github.com/gobtl/gobtl/pml.(*Comm).Recv(0xc0, {0xc2, 0x40, 0x40}, 0x0, 0x7)
	/src/pml/comm.go:175 +0x1
github.com/gobtl/gobtl/bench.(*runner).pingpong(0xc0, 0x1, 0x0, 0x8)
	/src/bench/p2p.go:36 +0x1
main.main()
	/x/main.go:9 +0x1
`
	if got, want := blockedIn(mainGoroutine([]byte(recv))), "pml.(*Comm).Recv, called from github.com/gobtl/gobtl/bench.(*runner).pingpong (/src/bench/p2p.go:36)"; got != want {
		t.Errorf("in Recv: %q, want %q", got, want)
	}
	const outside = `goroutine 1 [select (no cases)]:
main.main()
	/x/main.go:5 +0x1
`
	if got, want := blockedIn(mainGoroutine([]byte(outside))), "main.main (/x/main.go:5), outside gobtl"; got != want {
		t.Errorf("outside gobtl: %q, want %q", got, want)
	}
}
