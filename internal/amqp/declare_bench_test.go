package amqp

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// logDefs is an mq.DefinitionStore that appends every change to a seglog
// and fsyncs it before returning, one change at a time, as the broker's
// metadata log does. Load is not needed by the benchmarks.
type logDefs struct {
	mu  sync.Mutex
	log *seglog.Log
}

func (d *logDefs) write(key string, value []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	batch := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Key: []byte(key), Value: value}})
	_, err := d.log.Append(batch, seglog.AppendOptions{Durable: true})
	return err
}

func (d *logDefs) Put(key string, value []byte) error { return d.write(key, value) }
func (d *logDefs) Delete(key string) error            { return d.write(key, nil) }
func (d *logDefs) Load(func(string, []byte) error) error {
	return nil
}

// durableDeclareQueues and durableDeclareChannels are the shape of
// bench/compare's scale row: one connection, four channels declaring in
// parallel.
const (
	durableDeclareQueues   = 1000
	durableDeclareChannels = 4
)

// BenchmarkDurableDeclare: 1000 durable queue.declares over 4 channels of
// one connection, definitions fsynced; one op is the 1000.
func BenchmarkDurableDeclare(b *testing.B) { benchDurableDeclare(b, false) }

// BenchmarkDurableDeclarePublish: as BenchmarkDurableDeclare, each queue
// then gets one 1 KiB persistent message, confirmed (bench/compare's
// "Scale: durable queues" row).
func BenchmarkDurableDeclarePublish(b *testing.B) { benchDurableDeclare(b, true) }

func benchDurableDeclare(b *testing.B, publish bool) {
	dir := b.TempDir()
	meta, err := seglog.Open(filepath.Join(dir, "meta"), seglog.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	br := &testBroker{t: b, dir: filepath.Join(dir, "data"), logDefs: &logDefs{log: meta}, logs: &testLogWriter{t: b}}
	br.cfg = Config{Logger: slog.New(slog.DiscardHandler)}
	br.start()
	b.Cleanup(func() {
		br.stop()
		meta.Close()
	})
	conn := br.dial()
	chans := make([]*amqp091.Channel, durableDeclareChannels)
	confirms := make([]chan amqp091.Confirmation, durableDeclareChannels)
	for i := range chans {
		chans[i] = openChannel(b, conn)
		if publish {
			if err := chans[i].Confirm(false); err != nil {
				b.Fatal(err)
			}
			confirms[i] = chans[i].NotifyPublish(make(chan amqp091.Confirmation, durableDeclareQueues))
		}
	}
	body := make([]byte, 1024)
	b.ResetTimer()
	for n := range b.N {
		var wg sync.WaitGroup
		for c, ch := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				published := 0
				for i := c; i < durableDeclareQueues; i += durableDeclareChannels {
					q := fmt.Sprintf("scale-%d-%d", n, i)
					if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
						b.Error(err)
						return
					}
					if publish {
						err := ch.Publish("", q, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body})
						if err != nil {
							b.Error(err)
							return
						}
						published++
					}
				}
				for range published {
					if c := <-confirms[c]; !c.Ack {
						b.Error("nacked")
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
