//go:build race

package amqp

// raceEnabled: the race detector inflates heap and stacks.
const raceEnabled = true
