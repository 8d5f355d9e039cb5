package mq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// durableSizes records, through seglog's fsync hook, how many bytes of
// each segment file a completed fsync covered: what a power cut would
// leave of it.
type durableSizes struct {
	mu    sync.Mutex
	sizes map[string]int64
}

func watchFsyncs(t *testing.T) *durableSizes {
	d := &durableSizes{sizes: map[string]int64{}}
	t.Cleanup(seglog.SetSyncHook(func(f seglog.SyncedFile) {
		d.mu.Lock()
		d.sizes[f.Path] = max(d.sizes[f.Path], f.Stat.Size())
		d.mu.Unlock()
	}))
	return d
}

func (d *durableSizes) of(path string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sizes[path]
}

// Settlement records that name offsets past the end of the messages log
// (its tail lost in a power cut after they were made durable) are dropped
// at recovery for good, so that the messages that get those offsets next
// survive the following restart.
func TestStaleSettlementsDroppedAtRecovery(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	var last PublishResult
	for i := range 10 {
		last = e.publish(persistent("", "q", fmt.Sprint("old", i)))
	}
	waitDurable(t, last)
	// What a power cut leaves when the settlement log was fsynced after
	// messages 10-14 were settled and the messages log before they were
	// written: settlements of offsets the log no longer has.
	s := e.queueNamed("q").store
	s.mu.Lock()
	settled, err := s.settledLog()
	if err == nil {
		stale := record.NewBatch(time.Now().UnixMilli(), []record.Record{
			{Key: settleRecordKey, Value: encodeRanges([][2]int64{{10, 15}})},
			{Key: countRecordKey, Value: encodeCounts(map[int64]uint32{12: 3})},
		})
		_, err = settled.Append(stale, seglog.AppendOptions{})
	}
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	e.crash()
	if got := e.messages("q"); got != 10 {
		t.Fatalf("%d messages after the crash, want 10", got)
	}
	for i := range 5 {
		waitDurable(t, e.publish(persistent("", "q", fmt.Sprint("new", i))))
	}
	e.restart()
	e.restart()
	got := e.drain("q")
	want := append(bodies("old", 10), bodies("new", 5)...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after two restarts the queue holds %v, want %v", got, want)
	}
}

// A confirm never goes out for a message its store did not make durable,
// even when the store is closed while the confirm waits: a close that
// fails to write the held-back messages fails their confirms.
func TestConfirmFailsWhenCloseLosesTheMessage(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	waitDurable(t, e.publish(persistent("", "q", "first"))) // creates the log
	p := e.v.NewPublisher()
	res := p.mustPublish(t, persistent("", "q", "held back"))
	s := e.queueNamed("q").store
	// A log that takes no more writes, as after an I/O error.
	if err := s.messages.Load().Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err == nil {
		t.Fatal("close wrote the held-back message to a closed log")
	}
	p.Flush()
	if err := res.Durable.wait(); err == nil {
		t.Fatal("confirmed a message its store never wrote")
	}
}

// A message whose queue is deleted before its fsync is confirmed, as
// RabbitMQ does.
func TestConfirmOfMessageToDeletedQueue(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	p := e.v.NewPublisher()
	res := p.mustPublish(t, persistent("", "q", "m"))
	if _, err := e.v.DeleteQueue("q", false, false, 1); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	if err := res.Durable.wait(); err != nil {
		t.Fatalf("message to a deleted queue: %v, want a confirm", err)
	}
}

// Close closes every log of a store, also a settlement log it creates
// itself for the first settlements (taken since the last housekeeping).
func TestCloseClosesASettlementLogItCreates(t *testing.T) {
	before := seglog.OpenFiles()
	e := newEnv(t)
	e.declareQueue("q", true)
	waitDurable(t, e.publish(persistent("", "q", "m")))
	if got := e.drain("q"); len(got) != 1 { // settled; written by Close
		t.Fatalf("drained %v", got)
	}
	if err := e.r.Close(); err != nil {
		t.Fatal(err)
	}
	e.r = nil
	if after := seglog.OpenFiles(); after != before {
		t.Fatalf("%d segment files open after Close, %d before the registry opened", after, before)
	}
	e.open()
	if n := e.messages("q"); n != 0 {
		t.Fatalf("%d messages after a restart, want 0", n)
	}
}
