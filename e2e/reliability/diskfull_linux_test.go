//go:build linux

package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/record"
)

// Shape of the disk-full test.
const (
	diskSize       = "32m"
	fillerBytes    = 8 << 20 // freed to make room again
	fullTopic      = "full"
	fullProducers  = 2
	fullPad        = 1000 // bytes of padding per record: 1 KiB records fill the disk fast
	fullPublishers = 2
	fullAMQPRate   = 200 // messages per second per publisher: slow, so the freed space lasts
	fullDeadline   = 20 * time.Second
)

var fullQueues = []string{"full-q"}

// readQueue holds a few messages published before the fill, for reading
// on the full disk.
const readQueue = "full-read"

// TestDiskFull puts a node's data directory on a 32 MiB tmpfs, fills it with
// acks=all produces while AMQP publishers in confirm mode keep publishing,
// and checks: producers get a Kafka error code; AMQP publishers are told
// (connection.blocked from the disk alarm, or nacks with the alarm off);
// reads keep working; after a filler file is removed writes resume; and
// nothing acknowledged is lost, before and after a restart.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system; skipped with -short")
	}
	for _, tc := range []struct {
		name      string
		diskLimit int64 // node.Config.AMQP.DiskFreeLimit
	}{
		{"amqp-disk-alarm-at-2MiB", 2 << 20},
		{"amqp-disk-alarm-off", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := 1; round <= *fullFlag; round++ {
				runDiskFull(t, tc.diskLimit)
			}
		})
	}
}

func runDiskFull(t *testing.T, diskLimit int64) {
	mnt := mountTmpfs(t, diskSize)
	dataDir := filepath.Join(mnt, "data")
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, fillerBytes), 0o644); err != nil {
		t.Fatalf("write filler: %v", err)
	}
	logs := newNodeLog(t, slog.LevelError)
	cfgOpt := nodetest.WithConfig(func(c *node.Config) {
		c.AMQP.DiskFreeLimit = diskLimit
		c.AMQP.AlarmCheckInterval = 50 * time.Millisecond
	})
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), logs.option(), cfgOpt)
	addr, url := n.KafkaAddr(), nodetest.AMQPURL(n)
	segBytes := "1048576"
	createTopic(t, addr, fullTopic, 2, map[string]*string{"segment.bytes": &segBytes})
	declareQueues(t, url, append(fullQueues, readQueue)...)
	publishSome(t, url, readQueue, 20)
	tp := mustTopic(t, n, fullTopic)

	// Fill: Kafka producers as fast as they go, AMQP publishers slowly.
	// franz-go retries a retriable error (KAFKA_STORAGE_ERROR is one)
	// without end by default; give up after a few tries so the load sees
	// the error. Uncompressed, so the padding takes space.
	kld := startTaggedKafkaLoad(t, addr, fullTopic, "fill-", fullProducers, 0, fullPad, openGate{},
		kgo.RecordRetries(3), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(2000),
		// A retriable error makes franz-go refresh metadata before the
		// retry; by default it waits up to 5 s for that.
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	ald := startAMQPLoad(t, url, fullQueues, fullPublishers, fullAMQPRate, openGate{})

	code, err := waitProduceFails(t, addr, tp, fullDeadline)
	if err != nil {
		kld.stop()
		ald.stop()
		t.Fatalf("the disk never filled: %v (free %d bytes)", err, freeBytes(t, mnt))
	}
	start := time.Now()
	phase := func(name string) { t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), name) }
	t.Logf("disk full (free %d bytes): a raw acks=all produce gets error %d %s", freeBytes(t, mnt), code, errName(code))
	if code != kerr.KafkaStorageError.Code {
		t.Errorf("produce on a full disk: error %d %s, want %d KAFKA_STORAGE_ERROR", code, errName(code), kerr.KafkaStorageError.Code)
	}
	storageErrorSeen := waitFor(fullDeadline, func() bool {
		kld.mu.Lock()
		defer kld.mu.Unlock()
		for msg := range kld.failures {
			if strings.Contains(msg, kerr.KafkaStorageError.Message) {
				return true
			}
		}
		return false
	})
	phase("franz-go reported the error")
	kld.stop()
	phase("kafka load stopped")
	t.Logf("kafka load while filling: %d acknowledged; failures: %s", len(kld.acked), kld.failureSummary())
	if !storageErrorSeen {
		t.Errorf("no franz-go producer got %s while the disk was full", kerr.KafkaStorageError.Message)
	}

	// Reads keep working on a full disk.
	readBack := readTopic(t, addr, fullTopic)
	full := checkKafka(newReporter(t, "kafka read on the full disk"), readBack, kld)
	t.Logf("kafka read while full: %s", full)
	if full.survivors > 0 {
		// Records written and fsynced whose produce still failed: the
		// idempotent acks=all path fails when Sync cannot write the
		// recovery-point checkpoint (docs/reliability.md).
		t.Logf("FINDING: %d records are in the log although franz-go reported their produce as failed", full.survivors)
	}
	consumeSome(t, url, readQueue)

	// The AMQP publishers hear about it: nacks for publishes that failed,
	// and connection.blocked once the disk alarm (which reads the free
	// space at most once a second) trips.
	amqpTold := waitFor(5*time.Second, func() bool {
		ald.mu.Lock()
		defer ald.mu.Unlock()
		if diskLimit > 0 {
			return ald.blocked > 0
		}
		return ald.nacked > 0
	})
	ald.mu.Lock()
	confirmedWhileFull := len(ald.confirmed)
	ald.mu.Unlock()
	t.Logf("amqp while full: %s", ald.summary())
	switch {
	case diskLimit > 0 && !amqpTold:
		t.Errorf("amqp publishers were not sent connection.blocked with free space under the %d-byte disk limit", diskLimit)
	case diskLimit < 0 && !amqpTold:
		t.Errorf("amqp publishers got no nack on a full disk")
	}
	phase("reads checked")
	// Free space: writes resume.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freedAt := time.Now()
	if err := waitProduceWorks(t, addr, tp, fullDeadline); err != nil {
		t.Errorf("FINDING: produce does not resume within %v of freeing %d bytes: %v", fullDeadline, fillerBytes, err)
		for _, p := range tp.Partitions() {
			t.Logf("partition %d: offline=%v", p.Index(), p.Offline())
		}
	} else {
		t.Logf("produce works again %v after the filler was removed", time.Since(freedAt).Round(time.Millisecond))
	}
	after := startTaggedKafkaLoad(t, addr, fullTopic, "after-", 1, 500, fullPad, openGate{},
		kgo.RecordRetries(3), kgo.ProducerBatchCompression(kgo.NoCompression()))
	// AMQP confirms resume too (the alarm clears within a second).
	if !waitFor(fullDeadline, func() bool {
		ald.mu.Lock()
		defer ald.mu.Unlock()
		return len(ald.confirmed) > confirmedWhileFull+50
	}) {
		t.Errorf("amqp confirms did not resume after space returned: %s", ald.summary())
	}
	time.Sleep(500 * time.Millisecond) // the load itself: writes after the space came back
	after.stop()
	ald.stop()
	phase("loads after freeing stopped")
	if len(after.acked) == 0 {
		t.Errorf("no produce acknowledged after space returned: %s", after.failureSummary())
	}
	t.Logf("after freeing: kafka %d acknowledged (failures: %s); amqp %s", len(after.acked), after.failureSummary(), ald.summary())

	// Nothing acknowledged is lost, now and after a restart.
	checkKafkaBoth := func(stage, addr string) {
		k := checkKafka(newReporter(t, stage+" kafka"), readTopic(t, addr, fullTopic), kld, after)
		t.Logf("%s: kafka %s (%d acknowledged while filling, %d after freeing)", stage, k, len(kld.acked), len(after.acked))
	}
	checkKafkaBoth("before restart", addr)
	phase("checked before restart")
	closeNode(t, n)
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option(), cfgOpt)
	offline := false
	for _, p := range mustTopic(t, n, fullTopic).Partitions() {
		if err := p.Offline(); err != nil {
			// Seen here: a produce that ran out of space midway left its
			// partial bytes after the segment's last batch (see
			// docs/reliability.md, "partial write left behind").
			offline = true
			t.Errorf("partition %d offline after a restart on the once-full disk: %v", p.Index(), err)
		}
	}
	if offline {
		t.FailNow()
	}
	checkKafkaBoth("after restart", n.KafkaAddr())
	a := checkAMQP(newReporter(t, "after restart amqp"), ald, drainQueues(t, nodetest.AMQPURL(n), fullQueues))
	t.Logf("after restart: amqp %s", a)
	for _, line := range logs.find("level=ERROR") {
		t.Logf("node error while the disk was full: %s", line)
		break
	}
}

// mountTmpfs mounts a tmpfs of the given size for the test, or fails it
// when mounting is not permitted: a test must not skip for a missing
// privilege, which .ci/run checks for.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("cannot mount a %s tmpfs for the data directory: run the tests as root (or with CAP_SYS_ADMIN), as .ci/run does, or with -short: %v", size, err)
	}
	// Registered after t.TempDir's removal, so it runs before it, and
	// after the node's Close, which nodetest registers later still.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// rawProduce sends one acks=all produce of a 1 KiB record to partition 0
// and returns the partition's error code.
func rawProduce(ctx context.Context, cl *kgo.Client, tp *broker.Topic) (int16, error) {
	batch := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: append([]byte(probeValue), make([]byte, 1024)...)}})
	return rawProduceBatch(ctx, cl, tp, batch)
}

// rawProduceBatch sends batch to partition 0 with acks=all and returns the
// partition's error code.
func rawProduceBatch(ctx context.Context, cl *kgo.Client, tp *broker.Topic, batch []byte) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = tp.Name(), tp.ID()
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// waitProduceFails probes until a produce fails, and returns its code.
func waitProduceFails(t *testing.T, addr string, tp *broker.Topic, within time.Duration) (int16, error) {
	t.Helper()
	cl := newKafkaClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for ctx.Err() == nil {
		code, err := rawProduce(ctx, cl, tp)
		if err == nil && code != 0 {
			return code, nil
		}
		time.Sleep(20 * time.Millisecond) // polling: the disk fills at the load's pace
	}
	return 0, errors.New("every probe produce succeeded")
}

// waitProduceWorks probes until a produce succeeds.
func waitProduceWorks(t *testing.T, addr string, tp *broker.Topic, within time.Duration) error {
	t.Helper()
	cl := newKafkaClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		code, err := rawProduce(ctx, cl, tp)
		if err == nil && code == 0 {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("error %d %s", code, errName(code))
		}
		time.Sleep(50 * time.Millisecond) // polling: the broker has no "space is back" event to wait on
	}
	return last
}

func errName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "NONE"
}

// publishSome publishes count persistent messages to queue, confirmed.
func publishSome(t *testing.T, url, queue string, count int) {
	t.Helper()
	ld := startAMQPLoad(t, url, []string{queue}, 1, 0, openGate{})
	if !waitFor(10*time.Second, func() bool {
		ld.mu.Lock()
		defer ld.mu.Unlock()
		return len(ld.confirmed) >= count
	}) {
		t.Fatalf("publishing %d messages to %s: %s", count, queue, ld.summary())
	}
	ld.stop()
}

// consumeSome requires a consumer to receive messages from queue while
// the disk is full; it does not ack them (they go back on cancel).
func consumeSome(t *testing.T, url, queue string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Errorf("amqp dial on a full disk: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("amqp channel on a full disk: %v", err)
		return
	}
	if err := ch.Qos(10, 0, false); err != nil {
		t.Errorf("qos: %v", err)
		return
	}
	msgs, err := ch.Consume(queue, "reader", false, false, false, false, nil)
	if err != nil {
		t.Errorf("consume on a full disk: %v", err)
		return
	}
	timeout := time.After(5 * time.Second)
	for got := 0; got < 10; got++ {
		select {
		case <-msgs:
		case <-timeout:
			t.Errorf("amqp consumer got %d messages within 5s on a full disk", got)
			return
		}
	}
	t.Logf("amqp consumer receives messages on the full disk")
}

// TestDiskFullPartialWrite makes one produce run out of space midway: a
// 896 KiB batch with 256 KiB left on an 8 MiB tmpfs. The produce must fail
// with KAFKA_STORAGE_ERROR and leave nothing behind: once space is back,
// later produces work, and after a clean restart the partition is online
// with every acknowledged record.
func TestDiskFullPartialWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system; skipped with -short")
	}
	mnt := mountTmpfs(t, "8m")
	dataDir := filepath.Join(mnt, "data")
	cfgOpt := nodetest.WithConfig(func(c *node.Config) { c.AMQP.DiskFreeLimit = -1 })
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option(), cfgOpt)
	const topic = "partial"
	createTopic(t, n.KafkaAddr(), topic, 1, nil)
	before := produceEach(t, n.KafkaAddr(), topic, 1)[:corruptPerCall] // 3000 small records; keep a sample

	filler := filepath.Join(mnt, "filler")
	fillLeaving(t, filler, 256<<10)
	tp := mustTopic(t, n, topic)
	cl := newKafkaClient(t, n.KafkaAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs := make([]record.Record, 7) // 896 KiB: under max.message.bytes
	for i := range recs {
		recs[i] = record.Record{Value: append([]byte(probeValue), make([]byte, 128<<10)...)}
	}
	code, err := rawProduceBatch(ctx, cl, tp, record.NewBatch(time.Now().UnixMilli(), recs))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("896 KiB produce with %d bytes free: error %d %s", freeBytes(t, mnt), code, errName(code))
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce that cannot fit: error %d, want KAFKA_STORAGE_ERROR", code)
	}
	end := tp.Partitions()[0].EndOffset()
	size := segmentBytesOnDisk(t, filepath.Join(dataDir, topic+"-0"))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := produceEach(t, n.KafkaAddr(), topic, 1)
	t.Logf("log end %d after the failed produce; %d bytes of segment files on disk; then %d more records acknowledged", end, size, len(after))
	closeNode(t, n)

	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option(), cfgOpt)
	if err := mustTopic(t, n, topic).Partitions()[0].Offline(); err != nil {
		t.Fatalf("partition offline after a clean restart: %v (a failed write left its partial bytes after the last batch; docs/reliability.md)", err)
	}
	logs := readTopic(t, n.KafkaAddr(), topic)
	var c tally
	rep := newReporter(t, "after restart")
	for _, a := range append(before, after...) {
		c.checked++
		if logs[0][a.offset] != a.value {
			c.lost++
			rep.report("lost", "%q at offset %d, found %q", a.value, a.offset, logs[0][a.offset])
		}
	}
	t.Logf("after restart: %s", c)
}

// fillLeaving writes path until the file system is full, then shortens it
// so that about left bytes are free.
func fillLeaving(t *testing.T, path string, left int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(max(0, fi.Size()-left)); err != nil {
		t.Fatal(err)
	}
}

// segmentBytesOnDisk sums the sizes of a partition's .log files.
func segmentBytesOnDisk(t *testing.T, dir string) int64 {
	var n int64
	for _, s := range segments(t, dir) {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
