package broker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// An acks=1 producer's data is fsynced once flushAheadBytes have gathered,
// long before the periodic flush (an hour here) would get to it.
func TestFlushAheadSyncsBeforeTheInterval(t *testing.T) {
	b := openTestBroker(t, t.TempDir(), func(c *Config) { c.FlushInterval = time.Hour })
	defer b.Close()
	tp, err := b.CreateTopic(TopicSpec{Name: "ahead"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tp.Partition(0)

	synced := make(chan int64, 100)
	restore := seglog.SetSyncHook(func(f seglog.SyncedFile) {
		if filepath.Dir(f.Path) == p.dir && strings.HasSuffix(f.Path, ".log") {
			select {
			case synced <- f.Stat.Size():
			default:
			}
		}
	})
	defer restore()

	batch := batchOf(strings.Repeat("x", 256<<10))
	var written int64
	for written < flushAheadBytes/2 {
		if _, _, err := p.Produce(batch, 1); err != nil {
			t.Fatal(err)
		}
		written += int64(len(batch))
	}
	if got := p.unflushed.Load(); got != written || p.flushQueued.Load() {
		t.Fatalf("below the threshold: %d bytes counted of %d, queued %v", got, written, p.flushQueued.Load())
	}
	for written < flushAheadBytes+int64(len(batch)) {
		if _, _, err := p.Produce(batch, 1); err != nil {
			t.Fatal(err)
		}
		written += int64(len(batch))
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case size := <-synced:
			if size >= flushAheadBytes {
				return
			}
		case <-deadline:
			t.Fatalf("%d bytes appended with acks=1, no fsync of them within 10 s", written)
		}
	}
}

// Appends that wait for their own fsync do not count towards an early
// flush.
func TestDurableProduceDoesNotCountTowardsFlushAhead(t *testing.T) {
	b := openTestBroker(t, t.TempDir(), func(c *Config) { c.FlushInterval = time.Hour })
	defer b.Close()
	tp, err := b.CreateTopic(TopicSpec{Name: "durable"}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tp.Partition(0)
	if _, _, err := p.Produce(batchOf("a"), -1); err != nil {
		t.Fatal(err)
	}
	if got := p.unflushed.Load(); got != 0 {
		t.Errorf("acks=all append counted %d unflushed bytes", got)
	}
	one := batchOf("b")
	if _, _, err := p.Produce(one, 1); err != nil {
		t.Fatal(err)
	}
	if got := p.unflushed.Load(); got != int64(len(one)) {
		t.Errorf("acks=1 append counted %d unflushed bytes, want %d", got, len(one))
	}
}
