package ib

import (
	"strings"
	"testing"

	"github.com/gobtl/gobtl/core"
)

func TestALinkNameNamesTheRanksNode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		rank int
		want string
	}{
		{"", 0, ""},
		{"hca1", 5, "hca1"},
		{"hca1-node%r", 3, "hca1-node3"},
		{"%r/%r", 12, "12/12"},
		{"100%%-%r", 1, "100%-1"},
	} {
		if err := checkLinkName(tc.in); err != nil {
			t.Errorf("%q: %v", tc.in, err)
		}
		if got := linkName(tc.in, tc.rank); got != tc.want {
			t.Errorf("linkName(%q, %d) = %q, want %q", tc.in, tc.rank, got, tc.want)
		}
	}
}

func TestASharedLinkNeedsARateAndAKnownPlaceholder(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"link": "rail1-%r"}, "needs a rate"},
		{map[string]string{"link": "rail1-%h", "rate": "1GB/s"}, "may only be followed by r"},
		{map[string]string{"link": "rail1-%", "rate": "1GB/s"}, "may only be followed by r"},
		{map[string]string{"delay": "-1us"}, "negative"},
		{map[string]string{"link": "x", "rate": "1GB/s", "provider": "rdmacore"}, "softrc parameter"},
	} {
		p := core.MustParams(Params)
		for k, v := range tc.set {
			if err := p.SetText(k, v); err != nil {
				t.Fatalf("%s = %s: %v", k, v, err)
			}
		}
		_, err := parseConfig(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error saying %q", tc.set, err, tc.want)
		}
	}
}
