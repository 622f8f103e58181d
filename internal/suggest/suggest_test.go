package suggest

import "testing"

func TestNearestIsAFewEditsAwayAndNeverAShortNamesStranger(t *testing.T) {
	opts := []string{"aimd", "sm", "ib", "round_robin", "extoll_static"}
	for given, want := range map[string]string{
		"aimdd":         "aimd",        // one insertion
		"amid":          "aimd",        // a transposition is one edit
		"AIMD":          "aimd",        // case does not count
		"round_rboin":   "round_robin", // a transposition
		"sb":            "",            // "ib" and "sm" are one edit away but half the name
		"extoll_statik": "extoll_static",
		"nothing":       "",
	} {
		if got := Nearest(given, opts); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", given, got, want)
		}
	}
}
