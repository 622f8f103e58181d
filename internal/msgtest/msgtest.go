// Package msgtest is what every test of messages shares, in process or
// not: Fill and Check, the one payload every test's messages carry (a
// message delivered with another's bytes, shifted or cut short fails
// Check); Poll and Until, the one wait with a deadline; JobID, the job id
// of a test that opens transports itself; and ThreadNS, the thread's CPU
// clock for benchmarks on a loaded machine.
//
// It is a leaf: it imports nothing of gobtl's, so the BTL suite
// (btl/btltest) and the tests of a transport link no launcher. Starting
// jobs whose ranks are processes is package mptest's.
package msgtest

import (
	"crypto/rand"
	"encoding/hex"
)

// JobID is a job id no other job on the host has, for a test that opens
// transports itself: their sockets and /dev/shm files are named after
// it, and a name two test runs share makes the second fail to bind.
func JobID() string {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return "t" + hex.EncodeToString(b[:])
}
