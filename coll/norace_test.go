//go:build !race

package coll_test

const raceEnabled = false
