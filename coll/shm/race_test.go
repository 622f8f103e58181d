//go:build race

package shm_test

// raceEnabled trims the tests' matrices under the race detector, which
// makes every rank ten times slower on a machine of two shared cores.
const raceEnabled = true
