package pml

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/gobtl/gobtl/pml/internal/list"
)

type junkOp struct{}

func (junkOp) Advance() (bool, error) { return true, nil }

// junk sets every field of v (recursively) to a value that is not its
// zero value.
func junk(t *testing.T, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			f.SetUint(7)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct:
			junk(t, f)
		case reflect.Interface:
			switch f.Type() {
			case reflect.TypeFor[error]():
				f.Set(reflect.ValueOf(errors.New("junk")))
			case reflect.TypeFor[Op]():
				f.Set(reflect.ValueOf(junkOp{}))
			default:
				t.Fatalf("junk: no value for a field of type %v", f.Type())
			}
		default:
			t.Fatalf("junk: no value for a field of kind %v", f.Kind())
		}
	}
}

// A recycled request must come out of newRequest and sentRequest
// exactly as a new one would: they reset field by field, so a field added
// to Request and forgotten there keeps the previous message's value.
// What recycle guarantees (takeRequest) is all they may leave alone.
func TestNewRequestResetsEveryField(t *testing.T) {
	w := newWorld(t, 2, oneRail, Options{})
	e := w.comms[0].e
	e.mu.Lock()
	defer e.mu.Unlock()
	g := &group{world: []int{1, 0}, local: []int32{1, 0}} // this rank is 1 in it
	buf := make([]byte, 3)
	for _, c := range []struct {
		name string
		make func() *Request
		want func(r *Request) Request
	}{
		{"newRequest", func() *Request { return e.newRequest(reqRecv, 5, g, 1, 9, buf) },
			func(r *Request) Request {
				return Request{e: e, kind: reqRecv, idx: r.idx, gen: 42, ctx: 5, g: g, peer: 1, tag: 9, buf: buf}
			}},
		{"sentRequest", func() *Request { return e.sentRequest(g, 5, 1, 9, 3) },
			func(r *Request) Request {
				return Request{e: e, kind: reqSend, idx: r.idx, gen: 42, done: true, ctx: 5, g: g, peer: 1, tag: 9,
					status: Status{Source: 1, Tag: 9, Count: 3}}
			}},
	} {
		r := e.newRequest(reqSend, 0, nil, 1, 0, nil)
		idx := r.idx
		junk(t, reflect.ValueOf(r).Elem())
		// What recycle leaves: this engine's, no references, no
		// rendezvous state, off every list, no buffer, the slot of the
		// table it was given, and not a shared done send (those are never
		// recycled: the communicator's reference stays).
		r.e, r.refs, r.x, r.link, r.buf, r.idx, r.gen = e, 0, nil, list.Link[Request]{}, nil, idx, 41
		r.shared, r.holders = false, 0
		e.free.reqs.Put(r)
		got := c.make()
		if got != r {
			t.Fatalf("%s did not take the recycled request", c.name)
		}
		if want := c.want(r); !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: recycled request\n got %+v\nwant %+v", c.name, *got, want)
		}
	}
}
