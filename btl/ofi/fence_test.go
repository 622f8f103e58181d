//go:build ofi && cgo

package ofi

import (
	"strings"
	"testing"
)

// TestFenceSaysWhatKeepsOtherJobsOut: cxi is fenced by the VNI its
// launcher grants (SLINGSHOT_VNIS), and warned about without one; a
// provider with no key is fenced by the job-key proof alone, which is
// no cause for a warning.
func TestFenceSaysWhatKeepsOtherJobsOut(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		prov    string
		keySize int
		env     map[string]string
		want    string
		warn    bool
	}{
		{"cxi", 8, map[string]string{"SLINGSHOT_VNIS": "1042"}, "cxi VNI 1042 from the launcher", false},
		{"cxi", 8, nil, "SLINGSHOT_VNIS unset", true},
		{"efa", 4, nil, "efa's default authorization key", false},
		{"tcp;ofi_rxm", 0, map[string]string{"SLINGSHOT_VNIS": "7"}, "the job-key proof (no authorization key", false},
	} {
		how, warn := fence(c.prov, c.keySize, env(c.env))
		if !strings.Contains(how, c.want) || warn != c.warn {
			t.Errorf("fence(%q, %d, %v) = %q, %v; want %q, %v", c.prov, c.keySize, c.env, how, warn, c.want, c.warn)
		}
	}
}
