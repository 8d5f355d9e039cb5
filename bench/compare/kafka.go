package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceSpec is one cell of the Kafka produce matrix.
type produceSpec struct {
	acksAll    bool // acks=all (idempotent, franz-go's default) or acks=1 (not idempotent)
	recordSize int
	partitions int32
	producers  int
}

func (p produceSpec) String() string {
	acks := "acks=1"
	if p.acksAll {
		acks = "acks=all"
	}
	return fmt.Sprintf("Kafka produce %s, %s records, %d partition%s, %d producer%s", acks,
		sizeName(p.recordSize), p.partitions, plural(p.partitions), p.producers, plural(p.producers))
}

// producerOpts are the franz-go options of every benchmark producer:
// franz-go's defaults (10 ms linger, 1 MB batches, sticky partitioning,
// idempotent with up to 5 requests in flight for acks=all) except that
// compression is off, so the bytes stored are the bytes counted.
func producerOpts(addr, topic string, acksAll bool) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	if !acksAll {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

// withTopic creates a topic of partitions on the broker at addr, of the
// broker's default replication factor (1 on one node, 3 on a cluster of
// three), runs fn with its name and deletes it (so neither broker's data
// grows across runs).
func (s *suite) withTopic(ctx context.Context, addr string, partitions int32, fn func(topic string) (figures, error)) (figures, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := s.uniqueName("bench")
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = adm.DeleteTopics(dctx, topic)
	}()
	if _, err := waitSettled(ctx, adm, -1, topic); err != nil { // -1: any leader (kfake's broker is node 0)
		return nil, fmt.Errorf("topic %s never settled: %w", topic, err)
	}
	return fn(topic)
}

// fillTopic creates topic with partitions partitions on the broker at addr
// and produces total bytes of recordSize records to it with acks=1 (franz-go
// defaults otherwise, compression off), returning the record count.
func fillTopic(ctx context.Context, addr, topic string, partitions int32, recordSize int, total int64) (int64, error) {
	cl, err := kgo.NewClient(producerOpts(addr, topic, false)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return 0, fmt.Errorf("create topic: %w", err)
	}
	value := make([]byte, recordSize)
	rand.Read(value)
	n := total / int64(recordSize)
	var firstErr errOnce
	for i := int64(0); i < n && ctx.Err() == nil; i++ {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.set(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	if err := firstErr.get(); err != nil {
		return 0, err
	}
	return n, nil
}

// runKafkaProduce produces as fast as the producers go until the window
// ends and reports acknowledged records per second ("rate") and MB/s of
// record values ("mbps"), with the figures of each watch of the window
// (watchCommits: the server's group commit; watchCPU: cores busy).
func (s *suite) runKafkaProduce(ctx context.Context, addr string, p produceSpec, watches ...windowWatch) (figures, error) {
	return s.withTopic(ctx, addr, p.partitions, func(topic string) (figures, error) {
		w := s.newWindow()
		var watched []<-chan figures
		for _, watch := range watches {
			watched = append(watched, watch(ctx, w))
		}
		value := make([]byte, p.recordSize)
		rand.Read(value)
		var acked atomic.Int64
		var firstErr errOnce
		var wg sync.WaitGroup
		for range p.producers {
			cl, err := kgo.NewClient(producerOpts(addr, topic, p.acksAll)...)
			if err != nil {
				return nil, err
			}
			defer cl.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				produceUntil(ctx, cl, w.end, func() *kgo.Record { return &kgo.Record{Value: value} },
					func(err error) {
						if err != nil {
							firstErr.set(err)
						} else if w.contains(time.Now()) {
							acked.Add(1)
						}
					})
			}()
		}
		wg.Wait()
		if err := firstErr.get(); err != nil {
			return nil, err
		}
		rate := float64(acked.Load()) / w.seconds()
		f := figures{"rate": rate, "mbps": rate * float64(p.recordSize) / 1e6}
		for _, ch := range watched {
			maps.Copy(f, <-ch)
		}
		return f, nil
	})
}

// produceUntil hands records from next to cl until end, then flushes what
// is buffered (bounded by a minute) and reports each record's outcome to
// done. Records failed because the run ended are not reported.
func produceUntil(ctx context.Context, cl *kgo.Client, end time.Time, next func() *kgo.Record, done func(error)) {
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	promise := func(_ *kgo.Record, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		done(err)
	}
	for runCtx.Err() == nil {
		cl.Produce(runCtx, next(), promise)
	}
	flushCtx, cancelFlush := context.WithTimeout(ctx, time.Minute)
	defer cancelFlush()
	_ = cl.Flush(flushCtx)
}

// runKafkaTail runs one acks=1 producer flat out and one consumer reading
// the same new topic from its start (so from the tail, while it is being
// written) and reports records consumed per second ("rate") and produced
// per second ("produced").
func (s *suite) runKafkaTail(ctx context.Context, addr string, recordSize int) (figures, error) {
	return s.withTopic(ctx, addr, 1, func(topic string) (figures, error) {
		w := s.newWindow()
		consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return nil, err
		}
		defer consumer.Close()
		producer, err := kgo.NewClient(producerOpts(addr, topic, false)...)
		if err != nil {
			return nil, err
		}
		defer producer.Close()

		var consumed int64
		consumeCtx, stopConsuming := context.WithCancel(ctx)
		consumerDone := make(chan struct{})
		go func() {
			defer close(consumerDone)
			for consumeCtx.Err() == nil {
				fs := consumer.PollFetches(consumeCtx)
				now := time.Now()
				if w.contains(now) {
					consumed += int64(fs.NumRecords())
				}
				if !now.Before(w.end) {
					return
				}
			}
		}()

		value := make([]byte, recordSize)
		rand.Read(value)
		var produced atomic.Int64
		var firstErr errOnce
		produceUntil(ctx, producer, w.end, func() *kgo.Record { return &kgo.Record{Value: value} }, func(err error) {
			if err != nil {
				firstErr.set(err)
			} else if w.contains(time.Now()) {
				produced.Add(1)
			}
		})
		if err := sleepUntil(ctx, w.end); err != nil {
			stopConsuming()
			<-consumerDone
			return nil, err
		}
		// The consumer stops at its first poll after the window; a poll
		// that waits for data no one produces any more is cut short.
		t := time.AfterFunc(2*time.Second, stopConsuming)
		<-consumerDone
		t.Stop()
		stopConsuming()
		if err := firstErr.get(); err != nil {
			return nil, err
		}
		return figures{
			"rate":     float64(consumed) / w.seconds(),
			"produced": float64(produced.Load()) / w.seconds(),
		}, nil
	})
}

// runKafkaLatency produces 1 KiB records with acks=all at a fixed rate
// (scheduled, not closed-loop: each record carries the time it was due, so
// a stalled broker shows as latency rather than as fewer records) with no
// linger, consumes them from the tail and reports produce-to-consume
// latency p50/p99/p99.9 in ms and the consumed rate.
func (s *suite) runKafkaLatency(ctx context.Context, addr string, perSecond int) (figures, error) {
	return s.withTopic(ctx, addr, 1, func(topic string) (figures, error) {
		w := s.newWindow()
		consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return nil, err
		}
		defer consumer.Close()
		producer, err := kgo.NewClient(append(producerOpts(addr, topic, true), kgo.ProducerLinger(0))...)
		if err != nil {
			return nil, err
		}
		defer producer.Close()

		var lat latencies
		var consumed atomic.Int64 // records due inside the window, consumed so far
		consumeCtx, stopConsuming := context.WithCancel(ctx)
		defer stopConsuming()
		consumerDone := make(chan struct{})
		go func() {
			defer close(consumerDone)
			for consumeCtx.Err() == nil {
				fs := consumer.PollFetches(consumeCtx)
				fs.EachRecord(func(r *kgo.Record) {
					if w.contains(s.stampTime(r.Value)) {
						lat = append(lat, s.sinceStamp(r.Value))
						consumed.Add(1)
					}
				})
			}
		}()

		var firstErr errOnce
		sent := s.producePaced(ctx, producer, w, perSecond, &firstErr)
		// Records still in flight get 10 s to arrive; later ones count as
		// lost for this run (and show in the rate).
		deadline := time.Now().Add(10 * time.Second)
		for consumed.Load() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		stopConsuming()
		<-consumerDone
		if err := firstErr.get(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(lat) == 0 {
			return nil, errors.New("no record consumed")
		}
		return figures{
			"rate":  float64(consumed.Load()) / w.seconds(),
			"p50":   millis(percentile(lat, 0.50)),
			"p99":   millis(percentile(lat, 0.99)),
			"p999":  millis(percentile(lat, 0.999)),
			"sent":  float64(sent) / w.seconds(),
			"count": float64(len(lat)),
		}, nil
	})
}

// producePaced produces 1 KiB records at perSecond from now until the
// window ends, each stamped with the moment it was due, and returns how
// many were due inside the window.
func (s *suite) producePaced(ctx context.Context, cl *kgo.Client, w window, perSecond int, firstErr *errOnce) int64 {
	start := time.Now()
	interval := time.Second / time.Duration(perSecond)
	ticker := time.NewTicker(time.Millisecond)
	defer ticker.Stop()
	var sent, inWindow int64
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			firstErr.set(err)
		}
	}
	for {
		now := time.Now()
		if !now.Before(w.end) {
			break
		}
		// Send every record due by now, each stamped with its due time.
		for due := start.Add(time.Duration(sent) * interval); !due.After(now) && due.Before(w.end); due = start.Add(time.Duration(sent) * interval) {
			value := make([]byte, 1024)
			s.stampAt(value, due)
			cl.Produce(ctx, &kgo.Record{Value: value}, promise)
			sent++
			if w.contains(due) {
				inWindow++
			}
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return inWindow
		}
	}
	flushCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = cl.Flush(flushCtx)
	return inWindow
}

// errOnce keeps the first error reported by any goroutine.
type errOnce struct {
	mu  sync.Mutex
	err error
}

func (e *errOnce) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

func (e *errOnce) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// sizeName prints a record or body size: "1 KiB", "100 B".
func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func plural[T int | int32](n T) string {
	if n == 1 {
		return ""
	}
	return "s"
}
