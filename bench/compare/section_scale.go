package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Scale workloads run once each (not -runs times): each starts fresh
// servers, and their figures are sizes and one-off times.

const (
	partitionsPerTopic = 100
	scaleChannels      = 4 // AMQP channels declaring queues in parallel
)

// scaleSection measures memory and open files with many partitions and
// many queues, and start-up time with data on disk.
func (s *suite) scaleSection(ctx context.Context) error {
	for _, step := range []func(context.Context) error{s.scalePartitions, s.scaleQueues, s.scaleStartup} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// scaleResult is one side's figures and error.
type scaleResult struct {
	f   figures
	err error
}

// addScaleRows adds one row per metric from a Wharf and a peer result.
func (s *suite) addScaleRows(workload string, metrics []metric, w, p scaleResult, peer, skip string, notes func(metric, figures, figures) string) {
	out := []outcome{{medians: orEmpty(w.f), err: w.err}}
	c := comparison{workload: workload, metrics: metrics, skip: skip, notes: notes}
	if peer != "" {
		c.peer = &contender{name: peer}
		out = append(out, outcome{medians: orEmpty(p.f), err: p.err})
	}
	s.addRows(c, out)
}

func orEmpty(f figures) figures {
	if f == nil {
		return figures{}
	}
	return f
}

var sizeMetrics = []metric{
	{key: "rss", label: "resident memory", unit: mebibytes},
	{key: "files", label: "open file descriptors", unit: fileCount},
	{key: "seconds", label: "time to set up", unit: seconds},
}

// scalePartitions creates -scale-count partitions (topics of 100) with one
// record each on a fresh Wharf and a fresh kfake. If either fails (on a
// machine whose open-file limit is lower than the files they need, for
// instance), the failure is reported and both are measured again at a
// quarter of the count.
func (s *suite) scalePartitions(ctx context.Context) error {
	return s.atScale(func(n int) (bool, error) {
		s.logf("== scale: %d partitions", n)
		var w, p scaleResult
		w.f, w.err = s.withFreshWharf(ctx, "scale-partitions", func(ws *wharfServer) (figures, error) {
			return s.fillPartitions(ctx, ws.kafkaAddr, ws.pid(), n)
		})
		s.logf("   Wharf %v %v", w.f, w.err)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		p.f, p.err = s.withFreshKfake(ctx, "scale-partitions-kfake", func(k *kfakeServer) (figures, error) {
			return s.fillPartitions(ctx, k.addr, k.pid(), n)
		})
		s.logf("   kfake %v %v", p.f, p.err)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		topics := (n + partitionsPerTopic - 1) / partitionsPerTopic
		s.addScaleRows(fmt.Sprintf("Scale: %s partitions (%d topics), one 100 B record each", formatNumber(float64(n)), topics),
			sizeMetrics, w, p, kfakeCached.name, "", idleNote(n, "partition"))
		return w.err == nil && p.err == nil, nil
	})
}

// atScale runs measure at -scale-count and, if a side failed, once more at
// a quarter of it.
func (s *suite) atScale(measure func(n int) (ok bool, err error)) error {
	n := s.opts.scaleCount
	ok, err := measure(n)
	if err != nil || ok || n < 4 {
		return err
	}
	_, err = measure(n / 4)
	return err
}

// idleNote gives the idle figures measured before the workload and, for
// open files, the files added per partition or queue (n of them).
func idleNote(n int, what string) func(metric, figures, figures) string {
	return func(m metric, w, p figures) string {
		switch m.key {
		case "rss":
			if len(w) == 0 && len(p) == 0 {
				return ""
			}
			return fmt.Sprintf("idle before: %s MiB (Wharf), %s MiB (peer)", formatNumber(figureOr(w, "rss0")), formatNumber(figureOr(p, "rss0")))
		case "files":
			if len(w) == 0 && len(p) == 0 {
				return "open-file limit (soft / hard): " + openFileLimit()
			}
			perUnit := func(f figures) string {
				return formatNumber((figureOr(f, "files") - figureOr(f, "files0")) / float64(n))
			}
			return fmt.Sprintf("idle before: %s (Wharf), %s (peer); per %s: %s (Wharf), %s (peer)",
				formatCount(figureOr(w, "files0")), formatCount(figureOr(p, "files0")), what, perUnit(w), perUnit(p))
		}
		return "one run"
	}
}

// fillPartitions creates n partitions in topics of partitionsPerTopic on the
// broker at addr, produces one record to each, and reports the broker's
// resident memory and open files before and after, and the time taken.
func (s *suite) fillPartitions(ctx context.Context, addr string, pid, n int) (figures, error) {
	out, err := sizeOf(pid, "0")
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequestTimeoutOverhead(time.Minute))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(120_000)
	prefix := s.uniqueName("scale")
	start := time.Now()
	var topics []string
	for i := 0; i*partitionsPerTopic < n; i++ {
		topics = append(topics, fmt.Sprintf("%s-%d", prefix, i))
	}
	for i := 0; i < len(topics); i += 10 {
		batch := topics[i:min(i+10, len(topics))]
		parts := int32(min(partitionsPerTopic, n))
		resp, err := adm.CreateTopics(ctx, parts, 1, nil, batch...)
		if err != nil {
			return nil, fmt.Errorf("create topics: %w", err)
		}
		if err := resp.Error(); err != nil {
			return nil, fmt.Errorf("create topics: %w", err)
		}
	}
	value := make([]byte, 100)
	rand.Read(value)
	var firstErr errOnce
	var wg sync.WaitGroup
	produced := 0
	for _, t := range topics {
		for p := int32(0); p < int32(min(partitionsPerTopic, n)) && produced < n; p++ {
			wg.Add(1)
			produced++
			cl.Produce(ctx, &kgo.Record{Topic: t, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					firstErr.set(err)
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	if err := firstErr.get(); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	out["seconds"] = time.Since(start).Seconds()
	after, err := sizeOf(pid, "")
	if err != nil {
		return nil, err
	}
	for k, v := range after {
		out[k] = v
	}
	return out, nil
}

// sizeOf reads a process's resident memory and open files as figures
// "rss"+suffix and "files"+suffix.
func sizeOf(pid int, suffix string) (figures, error) {
	rss, err := residentMiB(pid)
	if err != nil {
		return nil, err
	}
	files, err := openFiles(pid)
	if err != nil {
		return nil, err
	}
	return figures{"rss" + suffix: rss, "files" + suffix: files}, nil
}

// scaleQueues declares -scale-count durable queues with one persistent
// message each on a fresh Wharf and a fresh RabbitMQ (again at a quarter of
// the count if either fails).
func (s *suite) scaleQueues(ctx context.Context) error {
	return s.atScale(func(n int) (bool, error) {
		s.logf("== scale: %d queues", n)
		var w, p scaleResult
		w.f, w.err = s.withFreshWharf(ctx, "scale-queues", func(ws *wharfServer) (figures, error) {
			return s.fillQueues(ctx, ws.amqpURL(), ws.pid(), n)
		})
		s.logf("   Wharf %v %v", w.f, w.err)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		peer := ""
		version, skip, err := s.withFreshRabbitMQ(ctx, "rabbitmq-scale", func(r *rabbitServer, pid int) {
			p.f, p.err = s.fillQueues(ctx, r.amqpURL(), pid, n)
			s.logf("   RabbitMQ %v %v", p.f, p.err)
		})
		if err != nil {
			return false, err
		}
		if skip == "" {
			peer = "RabbitMQ (classic queues)"
			s.addVersion(rabbitVersionLine(version))
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s.addScaleRows(fmt.Sprintf("Scale: %s durable queues, one 1 KiB persistent message each (%d channels declaring)", formatNumber(float64(n)), scaleChannels),
			sizeMetrics, w, p, peer, skip, idleNote(n, "queue"))
		return w.err == nil && (peer == "" || p.err == nil), nil
	})
}

// fillQueues declares n durable classic queues over scaleChannels channels
// in parallel, publishes one persistent message to each with confirms, and
// reports the server's memory and open files before and after.
func (s *suite) fillQueues(ctx context.Context, url string, pid, n int) (figures, error) {
	out, err := sizeOf(pid, "0")
	if err != nil {
		return nil, err
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	prefix := s.uniqueName("scaleq")
	body := make([]byte, 1024)
	rand.Read(body)
	start := time.Now()
	var firstErr errOnce
	var wg sync.WaitGroup
	for c := range scaleChannels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := declareAndPublish(ctx, conn, prefix, c, n, body); err != nil {
				firstErr.set(err)
			}
		}()
	}
	wg.Wait()
	if err := firstErr.get(); err != nil {
		return nil, err
	}
	out["seconds"] = time.Since(start).Seconds()
	after, err := sizeOf(pid, "")
	if err != nil {
		return nil, err
	}
	for k, v := range after {
		out[k] = v
	}
	return out, nil
}

// declareAndPublish handles queues c, c+scaleChannels, ... below n on its
// own channel.
func declareAndPublish(ctx context.Context, conn *amqp.Connection, prefix string, c, n int, body []byte) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n/scaleChannels+1))
	published := 0
	for i := c; i < n; i += scaleChannels {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		q := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare %s: %w", q, err)
		}
		if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body}); err != nil {
			return err
		}
		published++
	}
	for range published {
		if err := awaitConfirm(ctx, confirms); err != nil {
			return err
		}
	}
	return nil
}

// withFreshWharf runs fn against a new `wharf serve` on its own data
// directory and stops it afterwards.
func (s *suite) withFreshWharf(ctx context.Context, name string, fn func(*wharfServer) (figures, error)) (figures, error) {
	dir := filepath.Join(s.work, s.uniqueName(name))
	w, err := s.startWharf(ctx, dir)
	if err != nil {
		return nil, err
	}
	logStart := s.wharfLogSize()
	defer func() {
		s.procs.forget(w.child)
		w.terminate(time.Minute)
		os.RemoveAll(dir)
	}()
	f, err := fn(w)
	if err != nil && s.wharfLogSince(logStart, "too many open files") {
		err = fmt.Errorf("%w (Wharf's log: too many open files)", err)
	}
	return f, err
}

// withFreshKfake runs fn against a new kfake (page-cache mode) on its own
// data directory and stops it afterwards.
func (s *suite) withFreshKfake(ctx context.Context, name string, fn func(*kfakeServer) (figures, error)) (figures, error) {
	dir := filepath.Join(s.work, s.uniqueName(name))
	k, err := s.startKfake(ctx, kfakeCached, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		s.procs.forget(k.child)
		k.terminate(time.Minute)
		os.RemoveAll(dir)
	}()
	return fn(k)
}
