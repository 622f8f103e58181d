package pool

import (
	"testing"

	"pgregory.net/rapid"
)

type obj struct{ id int }

func TestGetReturnsWhatWasPutLastFirst(t *testing.T) {
	var p Pool[obj]
	a, b := p.Get(), p.Get()
	if a == nil || b == nil || a == b {
		t.Fatalf("two Gets from an empty pool gave %p and %p, want two new objects", a, b)
	}
	a.id = 7
	p.Put(a)
	p.Put(b)
	if got := p.Get(); got != b {
		t.Fatal("Get did not return the last object Put")
	}
	if got := p.Get(); got != a || got.id != 7 {
		t.Fatalf("Get returned %+v, want the first object as it was Put", got)
	}
	if p.Idle() != 0 {
		t.Fatalf("Idle() = %d after taking everything back", p.Idle())
	}
}

func TestAnEmptyPoolMakesZeroObjects(t *testing.T) {
	var p Pool[obj]
	x := p.Get()
	x.id = 3
	p.Put(x)
	if y := p.Get(); y != x || y.id != 3 {
		t.Fatalf("Get after Put returned %+v, want the recycled %+v as it was", y, x)
	}
	if y := p.Get(); y == x || y.id != 0 {
		t.Fatalf("Get from an empty pool returned %+v, want a new zero object", y)
	}
}

func TestTakeReturnsNilWhenNoneIsIdle(t *testing.T) {
	var p Pool[obj]
	if x := p.Take(); x != nil {
		t.Fatalf("Take from an empty pool returned %p", x)
	}
	x := &obj{id: 5}
	p.Put(x)
	if y := p.Take(); y != x {
		t.Fatalf("Take returned %p, want the object Put, %p", y, x)
	}
	if y := p.Take(); y != nil {
		t.Fatalf("Take after taking everything returned %p", y)
	}
}

func TestPoolAllocatesNothingOnceWarm(t *testing.T) {
	var p Pool[obj]
	p.Put(p.Get())
	p.Put(p.Get())
	n := testing.AllocsPerRun(1000, func() {
		a, b := p.Get(), p.Get()
		p.Put(a)
		p.Put(b)
	})
	if n != 0 {
		t.Fatalf("Get and Put of recycled objects allocate %.1f times", n)
	}
}

// TestPoolNeverHandsOutAnObjectTwice: whatever the order of Gets and
// Puts, an object is with at most one owner, a recycled object comes back
// as it was Put, and the pool makes a new one only when none is idle.
func TestPoolNeverHandsOutAnObjectTwice(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var p Pool[obj]
		made := 0
		out := map[*obj]bool{}
		var held []*obj
		rt.Repeat(map[string]func(*rapid.T){
			"get": func(rt *rapid.T) {
				idle := p.Idle()
				x := p.Get()
				if out[x] {
					rt.Fatalf("Get handed out %p, which is still in use", x)
				}
				if x.id == 0 { // new: number it
					if idle != 0 {
						rt.Fatalf("Get made a new object with %d idle", idle)
					}
					made++
					x.id = made
				} else if idle == 0 {
					rt.Fatalf("Get returned object %d from an empty pool", x.id)
				}
				out[x] = true
				held = append(held, x)
			},
			"put": func(rt *rapid.T) {
				if len(held) == 0 {
					rt.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(rt, "which")
				x := held[i]
				held = append(held[:i], held[i+1:]...)
				delete(out, x)
				p.Put(x)
			},
			"": func(rt *rapid.T) {
				if p.Idle()+len(held) != made {
					rt.Fatalf("%d idle and %d held, but %d made", p.Idle(), len(held), made)
				}
			},
		})
	})
}

func TestBytesRoundsUpAndRecycles(t *testing.T) {
	var p Bytes
	tests := []struct{ n, cap int }{{0, 1}, {1, 1}, {3, 4}, {64, 64}, {65, 128}, {4097, 8192}}
	for _, tc := range tests {
		b := p.Get(tc.n)
		if len(b) != tc.n || cap(b) != tc.cap {
			t.Fatalf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(b), cap(b), tc.n, tc.cap)
		}
		b[:cap(b)][0] = 0xAB
		p.Put(b)
		if c := p.Get(tc.n); &c[:cap(c)][0] != &b[:cap(b)][0] {
			t.Fatalf("Get(%d) after Put did not reuse the slice", tc.n)
		}
	}
}

func TestBytesDropsForeignAndExcessSlices(t *testing.T) {
	var p Bytes
	p.Put(nil)
	p.Put(make([]byte, 3)) // capacity 3: not from Get
	if got := len(p.classes[2]); got != 0 {
		t.Fatalf("the 4-byte class holds %d slices after a foreign Put", got)
	}
	for i := 0; i < 100; i++ {
		p.Put(make([]byte, 8))
	}
	if got := len(p.classes[3]); got != 64 {
		t.Fatalf("the 8-byte class holds %d slices, want the cap of 64", got)
	}
}

func TestBytesAllocatesNothingOnceWarm(t *testing.T) {
	var p Bytes
	p.Put(p.Get(1000))
	n := testing.AllocsPerRun(1000, func() { p.Put(p.Get(700)) })
	if n != 0 {
		t.Fatalf("Get and Put of a recycled buffer allocate %.1f times", n)
	}
}
