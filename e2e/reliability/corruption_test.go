package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// Shape of the corruption tests' data.
const (
	corruptRecords = 3000 // per partition
	corruptPerCall = 50   // records per ProduceSync: one batch each
)

// TestCorruptionThroughTheNode writes with franz-go to a node, stops it as a
// crash right after a flush would (clean Close, then the clean-shutdown
// markers removed, so recovery scans the tail segments), flips a byte in
// the middle of one partition's segment and truncates the last batch of
// another's (whose recovery point is put back before that batch, as a
// checkpoint older than the batch would have left it: a torn write can only
// be in data not yet known to be fsynced), and restarts:
//
//   - the truncated partition is repaired: every acknowledged record before
//     the torn batch is there, and it takes and serves new records;
//   - the flipped partition is offline: the broker log names the file and
//     position, Metadata reports KAFKA_STORAGE_ERROR with the node as an
//     offline replica, Fetch and Produce get KAFKA_STORAGE_ERROR, and not one
//     record of it is served;
//   - the untouched partition is unaffected.
func TestCorruptionThroughTheNode(t *testing.T) {
	const topic = "corrupt"
	const mid, tail, intact = 0, 1, 2
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option())
	createTopic(t, n.KafkaAddr(), topic, 3, nil)
	acked := produceEach(t, n.KafkaAddr(), topic, 3)
	closeNode(t, n)

	removeCleanMarkers(t, dataDir, topic, mid, tail, intact)
	midFile := lastSegment(t, filepath.Join(dataDir, topic+"-0"))
	midPos := batchPositions(t, midFile)
	flipAt := midPos[len(midPos)/2]
	flipByte(t, midFile, flipAt+record.HeaderSize+20) // inside the records of a batch in the middle
	tailFile := lastSegment(t, filepath.Join(dataDir, topic+"-1"))
	tailPos := batchPositions(t, tailFile)
	tornAt := tailPos[len(tailPos)-1]
	truncateFile(t, tailFile, tornAt+record.HeaderSize+7) // the last batch is torn
	tornOffset := batchBase(t, tailFile, tornAt)
	// A tail can only be torn above the recovery point: below it every
	// byte was fsynced. Close wrote the recovery point at the end; put it
	// back to where a checkpoint taken before the last batch left it.
	rewindRecoveryPoint(t, filepath.Dir(tailFile), tornOffset)
	t.Logf("flipped a byte of the batch at %s:%d; tore the last batch (offset %d) of %s at %d", midFile, flipAt, tornOffset, tailFile, tornAt)

	logs := newNodeLog(t, slog.LevelInfo)
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), logs.option())
	addr := n.KafkaAddr()
	tp := mustTopic(t, n, topic)

	// The flipped partition: offline, said so clearly, never served.
	var ce *seglog.CorruptionError
	if err := tp.Partitions()[mid].Offline(); !errors.As(err, &ce) {
		t.Fatalf("partition %d after a flipped byte: Offline() = %v, want a *seglog.CorruptionError", mid, err)
	}
	if ce.File != midFile || ce.Pos != flipAt {
		t.Errorf("corruption reported at %s:%d, want %s:%d", ce.File, ce.Pos, midFile, flipAt)
	}
	if lines := logs.find("partition offline", fmt.Sprintf("%s:%d", midFile, flipAt)); len(lines) == 0 {
		t.Errorf("no broker log line says the partition is offline and names %s:%d", midFile, flipAt)
	} else {
		t.Logf("broker log: %s", lines[0])
	}
	cl := newKafkaClient(t, addr)
	checkOfflineOverKafka(t, cl, tp, mid)

	// The torn partition: repaired, acknowledged data before the tear intact.
	if err := tp.Partitions()[tail].Offline(); err != nil {
		t.Fatalf("partition %d with a torn tail is offline: %v", tail, err)
	}
	if lines := logs.find("truncated torn tail", tailFile); len(lines) == 0 {
		t.Errorf("no broker log line reports the torn tail of %s being truncated", tailFile)
	}
	if end := tp.Partitions()[tail].EndOffset(); end != tornOffset {
		t.Errorf("partition %d ends at %d after repair, want %d (the torn batch's offset)", tail, end, tornOffset)
	}
	logsBack := readTopic(t, addr, topic, mid)
	var c tally
	rep := newReporter(t, "corruption")
	for _, a := range acked {
		if a.partition == mid || a.partition == tail && a.offset >= tornOffset {
			continue // offline, or torn away (as a crash before its fsync would)
		}
		c.checked++
		if got, ok := logsBack[a.partition][a.offset]; !ok || got != a.value {
			c.lost++
			rep.report("lost", "%q acknowledged at %d/%d, found %q", a.value, a.partition, a.offset, got)
		}
	}
	for p, log := range logsBack {
		for off, v := range log {
			if _, _, _, ok := parseKafkaValue(v); !ok {
				c.unexpected++
				rep.report("unexpected", "%d/%d holds %q", p, off, v)
			}
		}
	}
	t.Logf("partitions %d and %d after restart: %s", tail, intact, c)

	// Both healthy partitions keep taking writes and serving them.
	for _, p := range []int32{tail, intact} {
		before := tp.Partitions()[p].EndOffset()
		prod := newKafkaClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(kafkaValue(99, int64(p)))}
		err := prod.ProduceSync(ctx, r).FirstErr()
		cancel()
		if err != nil {
			t.Errorf("produce to healthy partition %d after restart: %v", p, err)
			continue
		}
		if r.Offset != before {
			t.Errorf("partition %d: new record at offset %d, want %d", p, r.Offset, before)
		}
		if got := readTopic(t, addr, topic, mid)[p][r.Offset]; got != string(r.Value) {
			t.Errorf("partition %d: new record read back as %q", p, got)
		}
	}
}

// checkOfflineOverKafka requires what a Kafka client sees of an offline
// partition: Metadata, Fetch, Produce and ListOffsets all report
// KAFKA_STORAGE_ERROR, and franz-go's consumer and producer get
// kerr.KafkaStorageError and no record.
func checkOfflineOverKafka(t *testing.T, cl *kgo.Client, tp *broker.Topic, partition int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	topic := tp.Name()

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	for _, mp := range mresp.Topics[0].Partitions {
		if mp.Partition != partition {
			continue
		}
		if mp.ErrorCode != kerr.KafkaStorageError.Code || len(mp.OfflineReplicas) != 1 || len(mp.ISR) != 0 {
			t.Errorf("metadata of the offline partition: error %d, offline replicas %v, ISR %v; want %d, [node], []",
				mp.ErrorCode, mp.OfflineReplicas, mp.ISR, kerr.KafkaStorageError.Code)
		}
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis = 100
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, tp.ID()
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = partition, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fresp, err := fetch.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	for _, rt := range fresp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.KafkaStorageError.Code || len(rp.RecordBatches) != 0 {
				t.Errorf("fetch from the offline partition: error %d and %d bytes of batches, want %d and none",
					rp.ErrorCode, len(rp.RecordBatches), kerr.KafkaStorageError.Code)
			}
		}
	}

	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = topic, tp.ID()
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = partition
	pp.Records = record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte("into an offline partition")}})
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	presp, err := prod.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Errorf("produce to the offline partition: error %d, want %d", code, kerr.KafkaStorageError.Code)
	}

	// What franz-go's own producer and consumer report.
	producer := newKafkaClient(t, cl.OptValue(kgo.SeedBrokers).([]string)[0],
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(1500*time.Millisecond))
	perr := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("x")}).FirstErr()
	if !errors.Is(perr, kerr.KafkaStorageError) {
		t.Errorf("franz-go produce to the offline partition: %v, want kerr.KafkaStorageError", perr)
	} else {
		t.Logf("franz-go produce to the offline partition: %v", perr)
	}
	consumer := newKafkaClient(t, cl.OptValue(kgo.SeedBrokers).([]string)[0],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.KeepRetryableFetchErrors(), kgo.FetchMaxWait(100*time.Millisecond))
	pollCtx, pollCancel := context.WithTimeout(ctx, 3*time.Second)
	defer pollCancel()
	var fetchErr error
	records := 0
	for fetchErr == nil && pollCtx.Err() == nil {
		fs := consumer.PollFetches(pollCtx)
		fs.EachError(func(_ string, p int32, err error) {
			if p == partition && !errors.Is(err, context.DeadlineExceeded) {
				fetchErr = err
			}
		})
		records += fs.NumRecords()
	}
	if records != 0 {
		t.Errorf("franz-go consumer got %d records from the offline partition", records)
	}
	if !errors.Is(fetchErr, kerr.KafkaStorageError) {
		t.Errorf("franz-go consume from the offline partition: %v, want kerr.KafkaStorageError", fetchErr)
	} else {
		t.Logf("franz-go consume from the offline partition: %v", fetchErr)
	}
}

// TestCorruptionOutsideRecoveryScan damages data the recovery scan does
// not look at, by design (seglog/doc.go): a log closed cleanly is trusted
// at Open, and after a crash only the segments from the recovery point on
// are verified. A lost or torn last batch of a closed segment is still
// found at Open (the segments no longer line up, or a header is cut); a
// flipped byte is found by the broker's scrubber, which verifies right
// after start-up what recovery trusted. Every damaged partition must go
// offline, within a deadline, naming the damaged file (and, for a flipped
// byte, in the broker log and to Kafka clients as for damage found at
// Open). If one stays online, what a franz-go consumer then gets is
// reported; franz-go must never hand the application a damaged record.
func TestCorruptionOutsideRecoveryScan(t *testing.T) {
	const topic = "limits"
	cases := []struct {
		name  string
		crash bool // remove the clean-shutdown marker
		last  bool // damage the last segment, else the first (closed) one
		flip  bool // flip a byte, else truncate
		torn  bool // truncate inside a batch, else at a batch boundary
	}{
		{name: "byte flipped in the last segment of a cleanly closed log", last: true, flip: true},
		{name: "byte flipped in a closed segment below the recovery point", crash: true, flip: true},
		{name: "closed segment below the recovery point lost its last batch (cut at a batch boundary)", crash: true},
		{name: "closed segment below the recovery point torn inside its last batch", crash: true, torn: true},
	}
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option())
	segBytes := "16384"
	createTopic(t, n.KafkaAddr(), topic, int32(len(cases)), map[string]*string{"segment.bytes": &segBytes})
	acked := produceEach(t, n.KafkaAddr(), topic, int32(len(cases)))
	closeNode(t, n)

	damagedFrom := map[int32]int64{} // partition -> first offset whose batch was damaged
	damagedFile := map[int32]string{}
	flippedAt := map[int32]int64{} // partition -> position of the batch with a flipped byte
	for i, tc := range cases {
		dir := filepath.Join(dataDir, topic+"-"+strconv.Itoa(i))
		if tc.crash {
			removeCleanMarkers(t, dataDir, topic, int32(i))
		}
		file := firstSegment(t, dir)
		if tc.last {
			file = lastSegment(t, dir)
		}
		pos := batchPositions(t, file)
		damagedFile[int32(i)] = file
		switch {
		case tc.flip:
			at := pos[len(pos)/2]
			flippedAt[int32(i)] = at
			damagedFrom[int32(i)] = batchBase(t, file, at)
			flipByte(t, file, at+record.HeaderSize+20)
		case tc.torn:
			at := pos[len(pos)-1]
			damagedFrom[int32(i)] = batchBase(t, file, at)
			truncateFile(t, file, at+record.HeaderSize+7)
		default:
			at := pos[len(pos)-1]
			damagedFrom[int32(i)] = batchBase(t, file, at)
			truncateFile(t, file, at)
		}
	}

	logs := newNodeLog(t, slog.LevelWarn)
	start := time.Now()
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), logs.option())
	tp := mustTopic(t, n, topic)
	// The scrubber runs in the background after start-up: wait for it.
	online := map[int32]bool{}
	for i, tc := range cases {
		p := int32(i)
		part := tp.Partitions()[p]
		if !waitFor(20*time.Second, func() bool { return part.Offline() != nil }) {
			online[p] = true
			t.Errorf("%s: partition %d still online 20 s after start (%s)", tc.name, p,
				describeDamagedPartition(t, n.KafkaAddr(), tp, p, acked, damagedFrom[p]))
			continue
		}
		t.Logf("case %q: offline %v after start: %v", tc.name, time.Since(start).Round(time.Millisecond), part.Offline())
	}
	cl := newKafkaClient(t, n.KafkaAddr())
	for i, tc := range cases {
		p := int32(i)
		part := tp.Partitions()[p]
		if online[p] {
			continue
		}
		var ce *seglog.CorruptionError
		if !errors.As(part.Offline(), &ce) || ce.File != damagedFile[p] {
			t.Errorf("%s: partition %d offline with %v, want a *seglog.CorruptionError naming %s", tc.name, p, part.Offline(), damagedFile[p])
			continue
		}
		if !tc.flip {
			continue // found at Open, as TestCorruptionThroughTheNode checks in full
		}
		if ce.Pos != flippedAt[p] {
			t.Errorf("%s: corruption reported at %s:%d, want %s:%d", tc.name, ce.File, ce.Pos, ce.File, flippedAt[p])
		}
		if lines := logs.find("partition offline", fmt.Sprintf("%s:%d", ce.File, ce.Pos)); len(lines) == 0 {
			t.Errorf("%s: no broker log line says the partition is offline and names %s:%d", tc.name, ce.File, ce.Pos)
		}
		checkOfflineOverKafka(t, cl, tp, p)
	}
}

// describeDamagedPartition reads a damaged partition with franz-go's
// consumer (which checks every batch's CRC) and says what it got. It
// fails the test if the consumer hands out a record that is not the one
// acknowledged at its offset.
func describeDamagedPartition(t *testing.T, addr string, tp *broker.Topic, p int32, acked []kafkaAck, damagedFrom int64) string {
	t.Helper()
	part := tp.Partitions()[p]
	if err := part.Offline(); err != nil {
		return fmt.Sprintf("offline: %v", err)
	}
	want := map[int64]string{}
	for _, a := range acked {
		if a.partition == p {
			want[a.offset] = a.value
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cl := newKafkaClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Name(): {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.KeepRetryableFetchErrors())
	end := part.EndOffset()
	got, wrong, next := 0, 0, int64(-1)
	served := map[int64]bool{}
	var fetchErr error
	for ctx.Err() == nil && next+1 < end && fetchErr == nil {
		fs := cl.PollFetches(ctx)
		// franz-go also reports the metadata errors of partitions it
		// does not consume (the offline one of another case): skip them.
		fs.EachError(func(_ string, ep int32, err error) {
			if ep == p && !errors.Is(err, context.DeadlineExceeded) {
				fetchErr = err
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got++
			next = r.Offset
			served[r.Offset] = true
			if want[r.Offset] != string(r.Value) {
				wrong++
				t.Errorf("partition %d offset %d served as %q, acknowledged as %q", p, r.Offset, r.Value, want[r.Offset])
			}
		})
	}
	missing := 0 // acknowledged offsets the consumer went past without getting
	for off := range want {
		if off <= next && !served[off] {
			missing++
		}
	}
	return fmt.Sprintf("online, log end %d, damage from offset %d; franz-go consumer got %d records (last offset %d, %d wrong, %d acknowledged ones skipped silently), then error: %v",
		end, damagedFrom, got, next, wrong, missing, fetchErr)
}

// produceEach writes corruptRecords acks=all records to each of the
// topic's partitions, corruptPerCall at a time, and returns them.
func produceEach(t *testing.T, addr, topic string, partitions int32) []kafkaAck {
	t.Helper()
	cl := newKafkaClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []kafkaAck
	for p := range partitions {
		for from := 0; from < corruptRecords; from += corruptPerCall {
			recs := make([]*kgo.Record, corruptPerCall)
			for i := range recs {
				recs[i] = &kgo.Record{Partition: p, Value: []byte(kafkaValue(int(p), int64(from+i)))}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce to partition %d: %v", p, err)
			}
			for i, r := range recs {
				out = append(out, kafkaAck{producer: int(p), seq: int64(from + i), partition: p, offset: r.Offset, value: string(r.Value)})
			}
		}
	}
	return out
}

func closeNode(t *testing.T, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("close node: %v", err)
	}
}

func mustTopic(t *testing.T, n *node.Node, name string) *broker.Topic {
	t.Helper()
	tp, err := n.Broker().Topic(name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// removeCleanMarkers makes the partitions' logs look as if the process had
// been killed right after everything was flushed: recovery then verifies
// the segments from the recovery point on.
func removeCleanMarkers(t *testing.T, dataDir, topic string, partitions ...int32) {
	t.Helper()
	for _, p := range partitions {
		path := filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, p), "clean-shutdown")
		if err := os.Remove(path); err != nil {
			t.Fatalf("remove clean-shutdown marker: %v", err)
		}
	}
}

// rewindRecoveryPoint rewrites a log's recovery-point checkpoint.
func rewindRecoveryPoint(t *testing.T, dir string, offset int64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "recovery-point"), []byte(strconv.FormatInt(offset, 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s (%v)", dir, err)
	}
	return files // Glob sorts; names are zero-padded offsets
}

func lastSegment(t *testing.T, dir string) string {
	s := segments(t, dir)
	return s[len(s)-1]
}

func firstSegment(t *testing.T, dir string) string {
	s := segments(t, dir)
	if len(s) < 2 {
		t.Fatalf("%s has one segment; the case needs a closed one", dir)
	}
	return s[0]
}

// batchPositions walks a segment's batch headers.
func batchPositions(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for pos := 0; pos < len(data); {
		if isZeros(data[pos:min(pos+record.HeaderSize, len(data))]) {
			break // the preallocated space after a live segment's data
		}
		h, err := record.ParseHeader(data[pos:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, pos, err)
		}
		out = append(out, int64(pos))
		pos += h.Size()
	}
	if len(out) < 3 {
		t.Fatalf("%s holds %d batches; the test needs more", path, len(out))
	}
	return out
}

func isZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func batchBase(t *testing.T, path string, pos int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, record.HeaderSize)
	if _, err := f.ReadAt(head, pos); err != nil {
		t.Fatal(err)
	}
	h, _ := record.ParseHeader(head) // short is fine: only the header is needed
	return h.BaseOffset
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}
