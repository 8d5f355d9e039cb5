//go:build race

package metrics_test

// raceEnabled: the race detector makes sync.Pool drop what it is given.
const raceEnabled = true
