package crash

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Shape of the AMQP load. Publishers round-robin their messages over the
// queues; consumer c consumes queue c mod amqpQueues.
const (
	amqpQueues     = 3
	amqpPublishers = 4
	amqpConsumers  = 6
	amqpPrefetch   = 50
	// confirmWindow bounds a publisher's unconfirmed messages, as a real
	// confirm-mode publisher would.
	confirmWindow = 256
	// A consumer proves its acks reached the broker with a synchronous
	// round trip (basic.qos) after every syncEvery acks, and at least
	// every syncPeriod while it has unproven acks.
	syncEvery  = 64
	syncPeriod = 20 * time.Millisecond
	// consumeShare is the consumers' pace as a share of the publishers':
	// below 1 so a backlog of ready messages is in the queues at the kill.
	consumeShare = 0.75
	// pacingPeriod is how often paced loops get their next share.
	pacingPeriod = 10 * time.Millisecond
)

func queueName(i int) string { return fmt.Sprintf("crash-q-%d", i) }

func amqpURL(addr string) string { return "amqp://guest:guest@" + addr + "/" }

// dialAMQP opens a connection and a channel. Connections are the caller's
// to close.
func dialAMQP(addr string) (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.Dial(amqpURL(addr))
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}

// declareQueues declares the test's durable queues. They live through
// every kill: after a restart they must still be there.
func declareQueues(t *testing.T, addr string) {
	t.Helper()
	conn, ch, err := dialAMQP(addr)
	if err != nil {
		t.Fatalf("amqp dial %s: %v", addr, err)
	}
	defer conn.Close()
	for i := range amqpQueues {
		if _, err := ch.QueueDeclare(queueName(i), true, false, false, false, nil); err != nil {
			t.Fatalf("declare %s: %v", queueName(i), err)
		}
	}
}

// pacer hands out rate tokens per second in shares every pacingPeriod. A
// nil pacer never waits.
type pacer struct {
	tick     *time.Ticker
	perShare int
	left     int
}

func newPacer(rate float64) *pacer {
	if rate <= 0 {
		return nil
	}
	per := max(1, int(rate*pacingPeriod.Seconds()))
	return &pacer{tick: time.NewTicker(pacingPeriod), perShare: per, left: per}
}

// take takes one token, waiting for the next share if there is none left;
// false if ctx ended first.
func (p *pacer) take(ctx context.Context) bool {
	if p == nil {
		return ctx.Err() == nil
	}
	for p.left == 0 {
		select {
		case <-ctx.Done():
			return false
		case <-p.tick.C:
			p.left = p.perShare
		}
	}
	p.left--
	return ctx.Err() == nil
}

func (p *pacer) stop() {
	if p != nil {
		p.tick.Stop()
	}
}

// amqpLoad is the publishers and consumers of one broker run, working
// until the broker is killed and stop is called.
type amqpLoad struct {
	book   *amqpBook
	run    int
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   []*amqp.Connection
	errKind map[string]int // why loops ended, for the log

	loops      sync.WaitGroup // publisher and consumer loops
	confirmers sync.WaitGroup // one per publisher, ends when its channel does
}

// startAMQPLoad connects amqpPublishers confirm-mode publishers, each
// publishing up to ratePerPublisher persistent messages per second, and
// amqpConsumers manual-ack consumers, every one on its own connection.
func startAMQPLoad(t *testing.T, addr string, book *amqpBook, ratePerPublisher int) *amqpLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ld := &amqpLoad{book: book, run: book.currentRun(), cancel: cancel, errKind: make(map[string]int)}
	fail := func(format string, args ...any) {
		cancel()
		ld.closeConns()
		ld.loops.Wait()
		ld.confirmers.Wait()
		t.Fatalf(format, args...)
	}
	for c := range amqpConsumers {
		conn, ch, err := dialAMQP(addr)
		if err != nil {
			fail("amqp consumer %d: dial: %v", c, err)
		}
		ld.addConn(conn)
		q := c % amqpQueues
		if err := ch.Qos(amqpPrefetch, 0, false); err != nil {
			fail("amqp consumer %d: qos: %v", c, err)
		}
		deliveries, err := ch.Consume(queueName(q), "", false, false, false, false, nil)
		if err != nil {
			fail("amqp consumer %d: consume %s: %v", c, queueName(q), err)
		}
		rate := float64(ratePerPublisher) * amqpPublishers * consumeShare / amqpConsumers
		ld.loops.Add(1)
		go ld.consume(ctx, ch, q, deliveries, newPacer(rate))
	}
	for range amqpPublishers {
		conn, ch, err := dialAMQP(addr)
		if err != nil {
			fail("amqp publisher: dial: %v", err)
		}
		ld.addConn(conn)
		if err := ch.Confirm(false); err != nil {
			fail("amqp publisher: confirm.select: %v", err)
		}
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmWindow))
		inflight := make(chan string, confirmWindow)
		ld.confirmers.Add(1)
		go ld.confirm(confirms, inflight)
		ld.loops.Add(1)
		go ld.publish(ctx, ch, book.newPublisher(), inflight, newPacer(float64(ratePerPublisher)))
	}
	return ld
}

func (ld *amqpLoad) addConn(c *amqp.Connection) {
	ld.mu.Lock()
	ld.conns = append(ld.conns, c)
	ld.mu.Unlock()
}

func (ld *amqpLoad) ended(why error) {
	ld.mu.Lock()
	ld.errKind[why.Error()]++
	ld.mu.Unlock()
}

// publish is one publisher's loop: persistent messages with increasing seq
// to the queues in turn until ctx ends or the channel fails. Each id goes
// into inflight before its publish, so the confirmer pairs the n-th
// confirmation with the n-th id; inflight's capacity is the confirm window.
func (ld *amqpLoad) publish(ctx context.Context, ch *amqp.Channel, publisher int, inflight chan<- string, pace *pacer) {
	defer ld.loops.Done()
	defer pace.stop()
	defer close(inflight)
	for seq := int64(0); pace.take(ctx); seq++ {
		id := messageID(publisher, seq)
		q := int(seq % amqpQueues)
		select {
		case inflight <- id:
		case <-ctx.Done():
			return
		}
		ld.book.published(id, q)
		err := ch.Publish("", queueName(q), false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent,
			MessageId:    id,
			ContentType:  "text/plain",
			Body:         []byte(id),
		})
		if err != nil {
			ld.ended(fmt.Errorf("publish: %w", err))
			return
		}
	}
}

// confirm pairs confirmations with ids until the channel closes (the
// broker was killed, or stop closed the connection). The client hands
// confirmations over one per delivery tag, in tag order.
func (ld *amqpLoad) confirm(confirms <-chan amqp.Confirmation, inflight <-chan string) {
	defer ld.confirmers.Done()
	for c := range confirms {
		id, ok := <-inflight
		if !ok {
			ld.book.t.Errorf("amqp confirmation for delivery tag %d with no message published for it", c.DeliveryTag)
			continue
		}
		ld.book.confirmResult(id, c.Ack)
	}
	for range inflight {
		// unconfirmed: the channel died first; drain so the publisher
		// is never stuck on a full window
	}
}

// consume is one consumer's loop: record each delivery, ack it, and prove
// the acks reached the broker with a basic.qos round trip now and then.
// It ends when ctx ends or the channel fails; acks not proven by then are
// simply not counted as synced.
func (ld *amqpLoad) consume(ctx context.Context, ch *amqp.Channel, queue int, deliveries <-chan amqp.Delivery, pace *pacer) {
	defer ld.loops.Done()
	defer pace.stop()
	syncTick := time.NewTicker(syncPeriod)
	defer syncTick.Stop()
	var unproven []string
	prove := func() bool {
		if err := ch.Qos(amqpPrefetch, 0, false); err != nil {
			ld.ended(fmt.Errorf("consumer sync: %w", err))
			return false
		}
		ld.book.acksSynced(unproven, time.Now())
		unproven = unproven[:0]
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-syncTick.C:
			if len(unproven) > 0 && !prove() {
				return
			}
		case d, ok := <-deliveries:
			if !ok {
				ld.ended(fmt.Errorf("consumer: delivery channel closed"))
				return
			}
			id := ld.book.delivered(ld.run, queue, &d)
			if err := d.Ack(false); err != nil {
				ld.ended(fmt.Errorf("ack: %w", err))
				return
			}
			ld.book.acked(id)
			unproven = append(unproven, id)
			if len(unproven) >= syncEvery && !prove() {
				return
			}
			if !pace.take(ctx) {
				return
			}
		}
	}
}

// stop ends the load after the broker was killed: loops stop, every
// connection is closed (a no-op for the dead ones), every confirmer has
// seen its channel close.
func (ld *amqpLoad) stop() map[string]int {
	ld.cancel()
	ld.closeConns()
	ld.loops.Wait()
	ld.confirmers.Wait()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.errKind
}

func (ld *amqpLoad) closeConns() {
	ld.mu.Lock()
	conns := ld.conns
	ld.conns = nil
	ld.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
