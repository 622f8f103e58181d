//go:build !race

package gobtl

const raceEnabled = false
