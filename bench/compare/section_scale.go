package main

import (
	"context"
	"crypto/rand"
	"errors"
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
	startupPartitions  = 4
	startupRecordSize  = 16 << 10
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
		peer, skip := "", ""
		if !rabbitAvailable() {
			skip = "rabbitmq-server not installed"
		} else {
			r, err := s.startRabbitMQ(ctx, filepath.Join(s.work, s.uniqueName("rabbitmq-scale")))
			if err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				skip = "RabbitMQ did not start: " + err.Error()
			} else {
				peer = "RabbitMQ (classic queues)"
				if pid, err := r.vmPid(); err == nil {
					p.f, p.err = s.fillQueues(ctx, r.amqpURL(), pid, n)
				} else {
					p.err = err
				}
				s.logf("   RabbitMQ %v %v", p.f, p.err)
				s.procs.forget(r.child)
				if err := r.terminate(2 * time.Minute); err != nil {
					s.logf("stopping RabbitMQ: %v", err)
				}
			}
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

// scaleStartup fills a topic with -scale-gib GiB, then times two restarts
// of the same data: after a clean stop (SIGTERM) and after kill -9. The
// clock runs from starting the process until the broker answers ListOffsets
// with every record there.
func (s *suite) scaleStartup(ctx context.Context) error {
	bytes := int64(s.opts.scaleGiB * (1 << 30))
	s.logf("== scale: start-up with %g GiB on disk", s.opts.scaleGiB)
	type server struct {
		addr  string
		proc  *child
		close func()
	}
	measure := func(start func() (server, error)) (figures, error) {
		srv, err := start()
		if err != nil {
			return nil, err
		}
		topic := s.uniqueName("startup")
		records, err := fillBytes(ctx, srv.addr, topic, bytes)
		if err != nil {
			srv.close()
			return nil, err
		}
		s.procs.forget(srv.proc)
		if err := srv.proc.terminate(5 * time.Minute); err != nil {
			return nil, err
		}
		// First a start after the clean stop above; that process is then
		// killed with SIGKILL, and the second start recovers from it.
		out := figures{}
		for _, crash := range []bool{false, true} {
			t0 := time.Now()
			srv, err = start()
			if err != nil {
				return nil, err
			}
			if err := awaitRecords(ctx, srv.addr, topic, records, 10*time.Minute); err != nil {
				srv.close()
				return nil, err
			}
			key := "clean"
			if crash {
				key = "crash"
			}
			out[key] = time.Since(t0).Seconds()
			if rss, err := residentMiB(srv.proc.pid()); err == nil {
				out["rss-"+key] = rss
			}
			s.procs.forget(srv.proc)
			if !crash {
				srv.proc.kill()
			} else {
				srv.close()
			}
		}
		return out, nil
	}

	var w, p scaleResult
	wdir := filepath.Join(s.work, "scale-startup")
	w.f, w.err = measure(func() (server, error) {
		ws, err := s.startWharf(ctx, wdir)
		if err != nil {
			return server{}, err
		}
		return server{addr: ws.kafkaAddr, proc: ws.child, close: func() { ws.terminate(time.Minute) }}, nil
	})
	s.logf("   Wharf %v %v", w.f, w.err)
	os.RemoveAll(wdir)
	if err := ctx.Err(); err != nil {
		return err
	}
	kdir := filepath.Join(s.work, "scale-startup-kfake")
	p.f, p.err = measure(func() (server, error) {
		k, err := s.startKfake(ctx, kfakeCached, kdir)
		if err != nil {
			return server{}, err
		}
		return server{addr: k.addr, proc: k.child, close: func() { k.terminate(time.Minute) }}, nil
	})
	s.logf("   kfake %v %v", p.f, p.err)
	os.RemoveAll(kdir)
	if err := ctx.Err(); err != nil {
		return err
	}
	s.addScaleRows(fmt.Sprintf("Scale: start-up with %g GiB on disk (%d partitions, 16 KiB records)", s.opts.scaleGiB, startupPartitions),
		[]metric{
			{key: "clean", label: "after a clean stop, until ListOffsets sees every record", unit: seconds},
			{key: "crash", label: "after kill -9", unit: seconds},
			{key: "rss-clean", label: "resident memory after start-up", unit: mebibytes},
		}, w, p, kfakeCached.name, "", func(m metric, _, _ figures) string {
			if m.key == "rss-clean" {
				return "kfake loads every record into memory"
			}
			return "one run"
		})
	return nil
}

// fillBytes creates topic with startupPartitions partitions and produces
// about total bytes of 16 KiB records with acks=1, returning the count.
func fillBytes(ctx context.Context, addr, topic string, total int64) (int64, error) {
	cl, err := kgo.NewClient(producerOpts(addr, topic, false)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, startupPartitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return 0, fmt.Errorf("create topic: %w", err)
	}
	value := make([]byte, startupRecordSize)
	rand.Read(value)
	n := total / startupRecordSize
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

// awaitRecords polls ListOffsets until the end offsets of topic add up to
// records.
func awaitRecords(ctx context.Context, addr, topic string, records int64, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		offsets, err := adm.ListEndOffsets(reqCtx, topic)
		cancel()
		if err == nil {
			err = offsets.Error()
		}
		if err == nil {
			var sum int64
			offsets.Each(func(o kadm.ListedOffset) { sum += o.Offset })
			if sum == records {
				return nil
			}
			err = fmt.Errorf("%d of %d records", sum, records)
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return errors.Join(fmt.Errorf("records not all there after %v", timeout), last)
}
