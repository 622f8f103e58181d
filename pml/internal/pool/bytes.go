package pool

// Bytes recycles byte slices by power-of-two size class, so that the
// copies the engine keeps of unexpected and out-of-order frames cost no
// allocation in steady state. It keeps at most 64 slices per class: a
// burst of large frames does not pin its memory for ever. The zero value
// is usable.
type Bytes struct{ classes [40][][]byte }

// sizeClass is the smallest c with 1<<c >= n.
func sizeClass(n int) int {
	c := 0
	for (1 << c) < n {
		c++
	}
	return c
}

// Get returns a slice of length n, with a capacity of n rounded up to a
// power of two. Its contents are whatever was there.
func (p *Bytes) Get(n int) []byte {
	c := sizeClass(n)
	if l := len(p.classes[c]); l > 0 {
		b := p.classes[c][l-1]
		p.classes[c] = p.classes[c][:l-1]
		return b[:n]
	}
	return make([]byte, n, 1<<c)
}

// Put hands b back for a later Get; nil and slices whose capacity is not
// a power of two (not made by Get) are dropped.
func (p *Bytes) Put(b []byte) {
	if b == nil {
		return
	}
	c := sizeClass(cap(b))
	if 1<<c != cap(b) || len(p.classes[c]) >= 64 {
		return
	}
	p.classes[c] = append(p.classes[c], b[:0])
}
