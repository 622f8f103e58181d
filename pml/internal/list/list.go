// Package list is an intrusive doubly linked list, the queue shape the
// protocol engine uses everywhere: posted receives and unexpected messages
// per context, frames and RDMA operations waiting for resources per
// subchannel, pipelines being pumped.
//
// Intrusive means the links live in the element (a Link field), as with
// the kernel's list_head: pushing and removing allocate nothing, and an
// element removes itself in O(1) without a search — a canceled receive, a
// matched one in the middle of its context's list. Each link also records
// its element and the list it is on, so that walking the list yields the
// elements, and removing an element that is not on the list is a no-op
// (as with container/list).
//
// Every method is small enough to be inlined. A generic list that reached
// its element's link through a method of a type parameter would call that
// method through the instantiation's dictionary, and neither inline it nor
// be inlined (a push and a remove took twice as long in a micro-benchmark
// with Go 1.26); a link that knows its element needs no such call.
//
// A List must not be copied once an element has been pushed: its links
// point back at it. Nothing here is safe for concurrent use.
package list

// Link is the part of an element that puts it on a List; an element that
// sits on several lists at once has one Link for each. The zero value is
// unlinked.
type Link[T any] struct {
	next, prev *Link[T]
	list       *List[T]
	owner      *T
}

// Value returns the element that holds k, as given to the push that
// linked it.
func (k *Link[T]) Value() *T { return k.owner }

// Next returns the link after k on its list, or nil at the end.
func (k *Link[T]) Next() *Link[T] { return k.next }

// Linked reports whether k is on a list.
func (k *Link[T]) Linked() bool { return k.list != nil }

// List is a doubly linked list of elements through their Links. The zero
// value is an empty list.
type List[T any] struct{ head, tail *Link[T] }

// Empty reports whether l has no element.
func (l *List[T]) Empty() bool { return l.head == nil }

// Front returns the first link of l, or nil if l is empty.
func (l *List[T]) Front() *Link[T] { return l.head }

// PushBack appends owner, linked through its Link k. Pushing a link that
// is already on a list is a bug in the caller and panics: it would tie the
// two lists together.
func (l *List[T]) PushBack(k *Link[T], owner *T) {
	if k.list != nil {
		panic("list: push of a linked element")
	}
	k.next, k.prev, k.list, k.owner = nil, l.tail, l, owner
	if l.tail != nil {
		l.tail.next = k
	} else {
		l.head = k
	}
	l.tail = k
}

// PushFront prepends owner, linked through its Link k; like PushBack it
// panics if k is already linked.
func (l *List[T]) PushFront(k *Link[T], owner *T) {
	if k.list != nil {
		panic("list: push of a linked element")
	}
	k.next, k.prev, k.list, k.owner = l.head, nil, l, owner
	if l.head != nil {
		l.head.prev = k
	} else {
		l.tail = k
	}
	l.head = k
}

// Remove unlinks k from l and reports whether it was there; a link on
// another list, or on none, is left alone.
func (l *List[T]) Remove(k *Link[T]) bool {
	if k.list != l {
		return false
	}
	if k.prev != nil {
		k.prev.next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		k.next.prev = k.prev
	} else {
		l.tail = k.prev
	}
	k.next, k.prev, k.list, k.owner = nil, nil, nil, nil
	return true
}

// PopFront removes the first element of l and returns it, or nil if l is
// empty.
func (l *List[T]) PopFront() *T {
	k := l.head
	if k == nil {
		return nil
	}
	x := k.owner
	l.Remove(k)
	return x
}
