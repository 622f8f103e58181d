//go:build !amd64

package sm

// canStream is false: there are no non-temporal stores here, so
// copy_in = "auto" has nothing to choose.
const canStream = false

// copyOut copies src into dst.
func copyOut(dst, src []byte, _ bool) int { return copy(dst, src) }
