// Package suggest is gobtl's did-you-mean: the name among some options
// that a misspelt one most likely meant. It depends on nothing, so that
// the plugin host (and every plugin module built against it) offers the
// same suggestions as the stack-file diagnostics without linking HCL.
package suggest

import "strings"

// Nearest returns the option closest to given, or "" when none is close
// enough to be what the user meant: at most two edits, and fewer than half
// the length of the longer name, so that "ib" does not suggest "sm".
func Nearest(given string, options []string) string {
	best, bestDist := "", 3
	for _, o := range options {
		if o == given {
			continue
		}
		d := editDistance(strings.ToLower(given), strings.ToLower(o))
		if d < bestDist && d*2 < max(len(given), len(o)) {
			best, bestDist = o, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counting an
// adjacent transposition as one edit (the commonest typo).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
