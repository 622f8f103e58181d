//go:build !race

package btltest

const raceEnabled = false
