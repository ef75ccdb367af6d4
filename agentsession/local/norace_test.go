//go:build !race

package local_test

// raceEnabled says the race detector slows the tests down.
const raceEnabled = false
