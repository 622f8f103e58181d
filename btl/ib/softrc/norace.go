//go:build !race

package softrc

func wireWritten() {}

func wireRead() {}

// raceBuild tells tests whose subject is timing that the race detector
// slows every poll several times over.
const raceBuild = false
