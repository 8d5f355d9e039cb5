package crash

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var (
	amqpRate  = flag.Int("crash.amqp-rate", 1500, "AMQP messages per second per publisher (0: unlimited)")
	ackMargin = flag.Duration("crash.ack-margin", time.Second,
		"an ack the broker processed at least this long before a kill must not come back (mq persists settlements every 250ms)")
)

// amqpLoadMin and amqpLoadMax bound how long the broker runs under load
// before a kill. The minimum is above the default ack margin, so every
// cycle has acks old enough to be checked.
const (
	amqpLoadMin = 1500 * time.Millisecond
	amqpLoadMax = 2500 * time.Millisecond
)

// TestAMQPCrashKeepsConfirmedMessages kills the broker while confirm-mode
// publishers and manual-ack consumers work on durable queues, restarts it
// and drains every queue. Every confirmed message must have been delivered
// at least once, no delivered id may be foreign or damaged, and no message
// may come back whose ack the broker had processed (proven by a later
// synchronous round trip) at least -crash.ack-margin before the kill.
func TestAMQPCrashKeepsConfirmedMessages(t *testing.T) {
	h := newAMQPHarness(t)
	b := h.start()
	declareQueues(t, b.amqpAddr)
	book := newAMQPBook(t, *ackMargin)

	for cycle := 1; cycle <= *cycles; cycle++ {
		before := book.beginCycle()
		runFor := h.loadDuration(amqpLoadMin, amqpLoadMax)
		ld := startAMQPLoad(t, b.amqpAddr, book, *amqpRate)
		time.Sleep(runFor) // the load itself: how long the broker runs before the kill
		killAt := time.Now()
		b.kill()
		ended := ld.stop()
		book.killed(killAt)

		restartAt := time.Now()
		b = h.start()
		restart := time.Since(restartAt)
		drainAt := time.Now()
		drained := drainQueues(t, b.amqpAddr, book)
		book.checkNothingLost()
		c := book.snapshot().minus(before)
		t.Logf("cycle %d: load %v, killed; restart %v, drain %v took %v per queue; %s",
			cycle, runFor.Round(time.Millisecond), restart.Round(time.Millisecond), time.Since(drainAt).Round(time.Millisecond), drained, c)
		if c.confirmed == 0 {
			t.Fatalf("cycle %d: no publish was confirmed in %v of load (loops ended by: %v)\n%s", cycle, runFor, ended, h.brokers[len(h.brokers)-2].logTail())
		}
		if !c.ok() {
			t.Fatalf("cycle %d: the crash broke AMQP guarantees (seed in the first log line)", cycle)
		}
	}

	b = checkCleanRestart(t, h, b, book)
	b.stop()
	h.checkNoRaceReports()
	total := book.total()
	requireCheckedAcks(t, total)
	t.Logf("total over %d cycles: %s", *cycles, total)
}

// TestCrashMixedKafkaAndAMQP runs acks=all Kafka producers and AMQP
// confirm-mode publishers with manual-ack consumers against the same
// broker in every cycle, kills it, restarts it, and applies both tests'
// checks: the Kafka read-back of TestCrashKeepsAckedRecords and the AMQP
// drain of TestAMQPCrashKeepsConfirmedMessages.
func TestCrashMixedKafkaAndAMQP(t *testing.T) {
	h := newAMQPHarness(t)
	b := h.start()
	adm := newAdmin(t, b.addr)
	idempotent := supportsIdempotence(t, adm)
	t.Logf("idempotent Kafka producers: %v", idempotent)
	declareQueues(t, b.amqpAddr)
	book := newAMQPBook(t, *ackMargin)

	ackedByTopic := make(map[string][]ackedRecord)
	var kafkaTotal verdict
	for cycle := 1; cycle <= *cycles; cycle++ {
		topic := fmt.Sprintf("mixed-%03d", cycle)
		createTopic(t, adm, topic, topicPartitions)
		before := book.beginCycle()
		runFor := h.loadDuration(amqpLoadMin, amqpLoadMax)
		kafkaLoad := startLoad(t, b.addr, topic, *producers, idempotent, *rate)
		amqpLoad := startAMQPLoad(t, b.amqpAddr, book, *amqpRate)
		time.Sleep(runFor) // the load itself: how long the broker runs before the kill
		killAt := time.Now()
		b.kill()
		led := kafkaLoad.stop()
		ended := amqpLoad.stop()
		book.killed(killAt)
		if len(led.acked) == 0 {
			t.Fatalf("cycle %d: no Kafka record was acknowledged in %v of load (failures: %v)\n%s", cycle, runFor, led.errKind, b.logTail())
		}
		ackedByTopic[topic] = led.acked

		b = h.start()
		adm = newAdmin(t, b.addr)
		v := judge(t, topic, led.acked, readTopic(t, b.addr, adm, topic))
		kafkaTotal = kafkaTotal.add(v)
		drained := drainQueues(t, b.amqpAddr, book)
		book.checkNothingLost()
		c := book.snapshot().minus(before)
		t.Logf("cycle %d: load %v, killed; Kafka: %s; AMQP: drained %v per queue, %s",
			cycle, runFor.Round(time.Millisecond), v, drained, c)
		if c.confirmed == 0 {
			t.Fatalf("cycle %d: no AMQP publish was confirmed in %v of load (loops ended by: %v)\n%s", cycle, runFor, ended, h.brokers[len(h.brokers)-2].logTail())
		}
		if !v.ok() || !c.ok() {
			t.Fatalf("cycle %d: the crash broke Kafka or AMQP guarantees (seed in the first log line)", cycle)
		}
	}

	var again verdict
	for _, topic := range sortedKeys(ackedByTopic) {
		again = again.add(judge(t, topic, ackedByTopic[topic], readTopic(t, b.addr, adm, topic)))
	}
	b = checkCleanRestart(t, h, b, book)
	b.stop()
	h.checkNoRaceReports()
	total := book.total()
	requireCheckedAcks(t, total)
	t.Logf("Kafka total over %d cycles: %s; final re-read of all %d topics: %s", *cycles, kafkaTotal, len(ackedByTopic), again)
	t.Logf("AMQP total over %d cycles: %s", *cycles, total)
}

func newAMQPHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.amqp = true
	t.Logf("AMQP: %d queues, %d confirm-mode publishers at up to %d messages/s each, %d manual-ack consumers (prefetch %d) at %.0f%% of that, ack margin %v",
		amqpQueues, amqpPublishers, *amqpRate, amqpConsumers, amqpPrefetch, consumeShare*100, *ackMargin)
	return h
}

// checkCleanRestart stops the broker with SIGTERM after the last drain,
// when every queue is empty and every ack was proven, starts it again and
// drains once more: a clean shutdown writes every settlement, so not a
// single message may come back. It returns the running broker.
func checkCleanRestart(t *testing.T, h *harness, b *broker, book *amqpBook) *broker {
	t.Helper()
	b.stop()
	book.stoppedCleanly()
	b = h.start()
	before := book.snapshot()
	drained := drainQueues(t, b.amqpAddr, book)
	if c := book.snapshot().minus(before); c.deliveries != 0 {
		t.Fatalf("after a clean shutdown with empty queues, %d messages came back (%v per queue): %s", c.deliveries, drained, c)
	}
	return b
}

// requireCheckedAcks fails a run in which no ack was old enough at a kill
// to be held to the no-comeback promise: the check would have checked
// nothing.
func requireCheckedAcks(t *testing.T, c amqpCounts) {
	t.Helper()
	if c.promised == 0 {
		t.Fatalf("no ack was processed %v before a kill, so none was checked for coming back: %s", *ackMargin, c)
	}
}
