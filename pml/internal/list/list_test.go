package list

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

type item struct {
	id   int
	link Link[item]
}

// values walks l front to back and checks every link on the way back.
func values(t interface{ Fatalf(string, ...any) }, l *List[item]) []int {
	var ids []int
	var prev *Link[item]
	for k := l.Front(); k != nil; k = k.Next() {
		if k.prev != prev {
			t.Fatalf("link of %d points back to %p, want %p", k.Value().id, k.prev, prev)
		}
		if k.list != l || !k.Linked() {
			t.Fatalf("link of %d does not name its list", k.Value().id)
		}
		ids = append(ids, k.Value().id)
		prev = k
	}
	if l.tail != prev {
		t.Fatalf("tail is %p, want the last link %p", l.tail, prev)
	}
	if l.Empty() != (len(ids) == 0) {
		t.Fatalf("Empty() = %v with %d elements", l.Empty(), len(ids))
	}
	return ids
}

func TestListKeepsPushOrder(t *testing.T) {
	var l List[item]
	items := make([]item, 5)
	for i := range items {
		items[i].id = i
	}
	l.PushBack(&items[2].link, &items[2])
	l.PushBack(&items[3].link, &items[3])
	l.PushFront(&items[1].link, &items[1])
	l.PushFront(&items[0].link, &items[0])
	l.PushBack(&items[4].link, &items[4])
	if got := values(t, &l); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("list holds %v, want 0..4", got)
	}
}

func TestRemoveUnlinksFromAnywhere(t *testing.T) {
	tests := []struct {
		name   string
		remove []int
		want   []int
	}{
		{"the head", []int{0}, []int{1, 2, 3}},
		{"the tail", []int{3}, []int{0, 1, 2}},
		{"the middle", []int{1, 2}, []int{0, 3}},
		{"everything, back to front", []int{3, 2, 1, 0}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l List[item]
			items := make([]item, 4)
			for i := range items {
				items[i].id = i
				l.PushBack(&items[i].link, &items[i])
			}
			for _, i := range tc.remove {
				if !l.Remove(&items[i].link) {
					t.Fatalf("Remove(%d) reports it was not on the list", i)
				}
				if items[i].link.Linked() {
					t.Fatalf("%d still linked after Remove", i)
				}
			}
			if got := values(t, &l); !slices.Equal(got, tc.want) {
				t.Fatalf("list holds %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRemoveLeavesOtherListsAlone(t *testing.T) {
	var a, b List[item]
	x, y := item{id: 1}, item{id: 2}
	a.PushBack(&x.link, &x)
	if b.Remove(&x.link) {
		t.Fatal("b.Remove took an element of a")
	}
	if b.Remove(&y.link) {
		t.Fatal("Remove of an unlinked element reports success")
	}
	if got := values(t, &a); !slices.Equal(got, []int{1}) {
		t.Fatalf("a holds %v after b's Remove, want [1]", got)
	}
}

func TestPopFrontEmptiesInOrder(t *testing.T) {
	var l List[item]
	if l.PopFront() != nil {
		t.Fatal("PopFront of an empty list returned an element")
	}
	items := []item{{id: 7}, {id: 8}}
	for i := range items {
		l.PushBack(&items[i].link, &items[i])
	}
	for _, want := range []int{7, 8} {
		if x := l.PopFront(); x == nil || x.id != want {
			t.Fatalf("PopFront = %v, want %d", x, want)
		}
	}
	if !l.Empty() || l.PopFront() != nil {
		t.Fatal("list not empty after popping everything")
	}
}

func TestPushOfALinkedElementPanics(t *testing.T) {
	var a, b List[item]
	x := item{id: 1}
	a.PushBack(&x.link, &x)
	for name, push := range map[string]func(){
		"PushBack":  func() { b.PushBack(&x.link, &x) },
		"PushFront": func() { a.PushFront(&x.link, &x) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s of a linked element did not panic", name)
				}
			}()
			push()
		}()
	}
}

func TestListAllocatesNothing(t *testing.T) {
	var l List[item]
	items := make([]item, 3)
	n := testing.AllocsPerRun(1000, func() {
		for i := range items {
			l.PushBack(&items[i].link, &items[i])
		}
		l.Remove(&items[1].link)
		l.PushFront(&items[1].link, &items[1])
		for l.PopFront() != nil {
		}
	})
	if n != 0 {
		t.Fatalf("push, remove and pop allocate %.1f times", n)
	}
}

// TestListMatchesASliceModel runs random pushes, removals and pops on a
// list and on a slice and checks after every step that they agree.
func TestListMatchesASliceModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		items := make([]item, 8)
		for i := range items {
			items[i].id = i
		}
		var l List[item]
		var model []int
		rt.Repeat(map[string]func(*rapid.T){
			"pushBack": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(items)-1).Draw(rt, "item")
				if items[i].link.Linked() {
					rt.Skip("already linked")
				}
				l.PushBack(&items[i].link, &items[i])
				model = append(model, i)
			},
			"pushFront": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(items)-1).Draw(rt, "item")
				if items[i].link.Linked() {
					rt.Skip("already linked")
				}
				l.PushFront(&items[i].link, &items[i])
				model = append([]int{i}, model...)
			},
			"remove": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(items)-1).Draw(rt, "item")
				at := slices.Index(model, i)
				if got := l.Remove(&items[i].link); got != (at >= 0) {
					rt.Fatalf("Remove(%d) = %v, model says %v", i, got, at >= 0)
				}
				if at >= 0 {
					model = slices.Delete(model, at, at+1)
				}
			},
			"popFront": func(rt *rapid.T) {
				x := l.PopFront()
				if len(model) == 0 {
					if x != nil {
						rt.Fatalf("PopFront of an empty list = %d", x.id)
					}
					return
				}
				if x == nil || x.id != model[0] {
					rt.Fatalf("PopFront = %v, want %d", x, model[0])
				}
				model = model[1:]
			},
			"": func(rt *rapid.T) {
				if got := values(rt, &l); !slices.Equal(got, model) {
					rt.Fatalf("list holds %v, model %v", got, model)
				}
				for i := range items {
					if items[i].link.Linked() != slices.Contains(model, i) {
						rt.Fatalf("Linked() of %d disagrees with the model %v", i, model)
					}
				}
			},
		})
	})
}
