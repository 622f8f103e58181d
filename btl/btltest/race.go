//go:build race

package btltest

const raceEnabled = true
