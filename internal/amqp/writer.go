package amqp

import (
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// outKind says how the writer encodes an outItem.
type outKind uint8

const (
	outMethod  outKind = iota // a method without content
	outDeliver                // basic.deliver and its message
	outContent                // another method with content (basic.get-ok, basic.return) and its message
	outAck                    // a publisher confirm: basic.ack multiple=true, coalesced
	outNack                   // a publisher confirm: basic.nack for one message
	outStop                   // last item: flush and stop writing
)

// outItem is one thing for the writer to send. Deliveries are kept as
// fields rather than method structs so queuing one allocates nothing.
type outItem struct {
	kind        outKind
	channel     uint16
	method      amqpwire.Method // outMethod, outContent
	msg         *mq.Message     // outDeliver, outContent
	tag         uint64          // outDeliver: delivery tag; outAck/outNack: publish sequence number
	consumerTag string          // outDeliver
	redelivered bool            // outDeliver
	size        int64           // bytes counted against the outbound limit
}

// outbound is the queue between a connection's producers (its reader, the
// queues delivering to its consumers, confirm goroutines) and its writer
// goroutine. Pushing never blocks; deliveries are refused instead when too
// many bytes are waiting.
type outbound struct {
	mu      sync.Mutex
	items   []outItem
	held    int64       // delivery bytes queued or being written
	limit   int64       // refuse deliveries while held >= limit
	starved []*consumer // refused because of the limit; resumed when drained
	stopped bool        // outStop queued: nothing more is accepted
	wake    chan struct{}
}

func newOutbound(limit int64) *outbound {
	return &outbound{limit: limit, wake: make(chan struct{}, 1)}
}

func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// push queues it unless the writer is stopping.
func (o *outbound) push(it outItem) {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return
	}
	o.items = append(o.items, it)
	o.mu.Unlock()
	o.signal()
}

// method queues a method frame.
func (o *outbound) method(channel uint16, m amqpwire.Method) {
	o.push(outItem{kind: outMethod, channel: channel, method: m})
}

// ack queues a confirm for every publish up to seq. Confirms are emitted in
// sequence order, so one still waiting in the queue for the same channel
// is simply raised to seq: that is the multiple=true coalescing.
func (o *outbound) ack(channel uint16, seq uint64) {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return
	}
	if n := len(o.items); n > 0 && o.items[n-1].kind == outAck && o.items[n-1].channel == channel {
		o.items[n-1].tag = seq
		o.mu.Unlock()
		return
	}
	o.items = append(o.items, outItem{kind: outAck, channel: channel, tag: seq})
	o.mu.Unlock()
	o.signal()
}

// deliver queues a consumer delivery unless the bytes already waiting are
// over the limit; then k is remembered and resumed once the writer drains.
func (o *outbound) deliver(it outItem, k *consumer) bool {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return false
	}
	if o.held >= o.limit {
		if !k.outStarved {
			k.outStarved = true
			o.starved = append(o.starved, k)
		}
		o.mu.Unlock()
		return false
	}
	o.held += it.size
	o.items = append(o.items, it)
	o.mu.Unlock()
	o.signal()
	return true
}

// stop queues the final item; later pushes are dropped.
func (o *outbound) stop() {
	o.mu.Lock()
	if !o.stopped {
		o.stopped = true
		o.items = append(o.items, outItem{kind: outStop})
	}
	o.mu.Unlock()
	o.signal()
}

// take moves the queued items into buf (reused) and returns them.
func (o *outbound) take(buf []outItem) []outItem {
	o.mu.Lock()
	buf, o.items = o.items, buf[:0]
	o.mu.Unlock()
	return buf
}

// release returns written delivery bytes and, once at most half the limit
// is held, hands back the consumers to resume.
func (o *outbound) release(n int64) []*consumer {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held -= n
	if len(o.starved) == 0 || o.held > o.limit/2 {
		return nil
	}
	starved := o.starved
	o.starved = nil
	for _, k := range starved {
		k.outStarved = false
	}
	return starved
}

// deliverySize is what a delivery counts against the outbound limit: the
// body, the properties and roughly the frames around them.
func deliverySize(m *mq.Message) int64 {
	return int64(len(m.Body)+len(m.RawProperties)) + 64
}

// writeLoop is the connection's writer goroutine: it writes queued items in
// batches, flushing when the queue runs dry, and runs the heartbeat timer.
// It returns after writing outStop.
func (c *conn) writeLoop() {
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		t := time.NewTicker(c.heartbeat / 2)
		defer t.Stop()
		tick = t.C
	}
	hb := heartbeatMonitor{lastFrames: c.framesRead.Load()}
	var batch []outItem
	for {
		select {
		case <-c.out.wake:
		case <-tick:
			c.heartbeatTick(&hb)
			continue
		}
		stop := c.writeBurst(&batch)
		c.releaseWriter() // nothing left to write: the buffer goes back until the next wake
		if stop {
			return
		}
		hb.wrote = true
	}
}

// writeBurst writes the queued items, and those queued meanwhile, until the
// queue runs dry or outStop is written, and flushes. It reports whether
// outStop was written. Over TLS the records of the burst leave in few
// large writes (tlsconf.Socket) rather than a system call per 16 KiB
// record.
func (c *conn) writeBurst(batch *[]outItem) (stopped bool) {
	write := func() error {
		stopped = c.writeQueued(batch)
		c.flush()
		return nil
	}
	if c.tlsSock == nil {
		write()
		return stopped
	}
	if err := c.tlsSock.Batch(write); err != nil {
		c.writeFailed(err)
	}
	return stopped
}

// writeQueued is writeBurst without the final flush.
func (c *conn) writeQueued(batch *[]outItem) (stopped bool) {
	for {
		*batch = c.out.take(*batch)
		if len(*batch) == 0 {
			return false
		}
		var written int64
		for i := range *batch {
			if (*batch)[i].kind == outStop {
				stopped = true
				break
			}
			c.writeItem(&(*batch)[i])
			written += (*batch)[i].size
		}
		clear(*batch) // drop message references
		starved := c.out.release(written)
		if stopped {
			return true
		}
		if len(starved) > 0 {
			c.flush() // the resumed deliveries queue behind what is written
			for _, k := range starved {
				k.resume()
			}
		}
	}
}

// writeItem encodes one item into the connection's buffer. After a write
// error the connection is dead: items are dropped so producers never wait.
func (c *conn) writeItem(it *outItem) {
	if c.writeErr != nil {
		return
	}
	var err error
	switch it.kind {
	case outMethod:
		err = c.writer().WriteMethod(it.channel, it.method)
	case outDeliver:
		d := &c.deliverScratch
		d.ConsumerTag, d.DeliveryTag, d.Redelivered = it.consumerTag, it.tag, it.redelivered
		d.Exchange, d.RoutingKey = it.msg.Exchange, it.msg.RoutingKey
		err = c.writeContent(it.channel, d, it.msg)
	case outContent:
		err = c.writeContent(it.channel, it.method, it.msg)
	case outAck:
		c.ackScratch = amqpwire.BasicAck{DeliveryTag: it.tag, Multiple: true}
		err = c.writer().WriteMethod(it.channel, &c.ackScratch)
	case outNack:
		err = c.writer().WriteMethod(it.channel, &amqpwire.BasicNack{DeliveryTag: it.tag})
	}
	if err != nil {
		c.writeFailed(err)
	}
}

// writeContent writes m with msg's properties and body, forwarding the
// properties as received when mq kept them.
func (c *conn) writeContent(channel uint16, m amqpwire.Method, msg *mq.Message) error {
	if len(msg.RawProperties) > 0 || msg.Properties.Flags() == 0 {
		return c.writer().WriteContentRaw(channel, m, msg.RawProperties, msg.Body)
	}
	return c.writer().WriteContent(channel, m, &msg.Properties, msg.Body)
}

func (c *conn) flush() {
	if c.writeErr != nil || c.lw == nil || c.lw.w.Buffered() == 0 {
		return
	}
	if err := c.lw.w.Flush(); err != nil {
		c.writeFailed(err)
	}
}

// writeFailed records the first write error and closes the socket, which
// ends the reader and with it the connection.
func (c *conn) writeFailed(err error) {
	if c.writeErr != nil {
		return
	}
	c.writeErr = err
	if !c.isClosing() {
		c.log.Debug("write failed; closing connection", "err", err)
	}
	c.nc.Close()
}

// heartbeatMonitor is the writer's view of heartbeat state between ticks.
type heartbeatMonitor struct {
	wrote      bool   // something was flushed since the last tick
	lastFrames uint64 // frames read at the last tick
	quietTicks int    // consecutive ticks without a frame from the peer
}

// heartbeatTick runs every heartbeat/2: it sends a heartbeat if nothing
// else was sent since the last tick, and closes the connection when the
// peer has sent nothing for two heartbeat intervals (RabbitMQ's rule).
// While the reader is deliberately paused (a publisher blocked by an
// alarm) silence is the server's doing and is not counted.
func (c *conn) heartbeatTick(hb *heartbeatMonitor) {
	if !hb.wrote && c.writeErr == nil {
		if err := c.writer().WriteHeartbeat(); err != nil {
			c.writeFailed(err)
		}
		c.flush()
		c.releaseWriter()
	}
	hb.wrote = false

	frames := c.framesRead.Load()
	if frames != hb.lastFrames || c.readPaused.Load() {
		hb.lastFrames, hb.quietTicks = frames, 0
		return
	}
	hb.quietTicks++
	if hb.quietTicks >= 4 { // four half-intervals: two heartbeats missed
		c.log.Warn("missed heartbeats from client; closing connection", "timeout", c.heartbeat)
		c.nc.Close()
	}
}
