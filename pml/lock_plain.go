//go:build !(linux && amd64 && !race)

package pml

// biasable is false: without membarrier(2) on amd64 (or under the race
// detector, which cannot see the asymmetric fence) the engine lock is a
// plain mutex.
func biasable() bool { return false }

func membarrier() {}

func lockFast(l *engineLock) { lockSlow(l) }

func unlockFast(l *engineLock) { unlockSlow(l) }

func getg() uintptr { return 1 }
