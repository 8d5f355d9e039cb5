package amqp

import "time"

// flowPauseDuration is how long the reader of a publisher whose message
// landed in a backlogged queue stops reading. While the backlog stays
// above Config.FlowBacklog each publish costs one pause, which holds the
// publisher near the consumers' pace; once it falls below, the publisher
// runs at full speed again.
const flowPauseDuration = time.Millisecond

// flowPause is publisher flow control: the reader sleeps briefly, not
// reading the socket, so TCP pushes back on the client. It ends early when
// the connection is killed or the server shuts down. Reader only.
func (c *conn) flowPause() {
	c.flushPublishes()
	t := time.NewTimer(flowPauseDuration)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.abort:
	case <-c.stopping:
	}
}
