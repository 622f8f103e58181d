package softrc

import "testing"

func TestBothDirectionsOfAConnectionShareOneLink(t *testing.T) {
	a, b := connected(t, defaultRC())
	for _, e := range []*end{a, b} {
		e.dev.mu.Lock()
		n := len(e.dev.links)
		e.dev.mu.Unlock()
		if n != 1 {
			t.Fatalf("%s has %d links to its one peer", e.dev.name, n)
		}
	}
}
