package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

func openTestBroker(t *testing.T, dir string, mutate ...func(*Config)) *Broker {
	t.Helper()
	cfg := Config{DataDir: dir}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

func batchOf(values ...string) []byte {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(v)}
	}
	return record.NewBatch(time.Now().UnixMilli(), recs)
}

// readValues reads every record value of a partition from offset 0.
func readValues(t *testing.T, p *Partition) []string {
	t.Helper()
	s, err := p.Read(p.StartOffset(), 1<<30)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	defer s.Release()
	data, err := s.Bytes()
	if err != nil {
		t.Fatalf("Bytes: %v", err)
	}
	var out []string
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil {
			t.Fatalf("ParseHeader: %v", err)
		}
		recs, err := record.Records(data[:h.Size()])
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
		data = data[h.Size():]
	}
	return out
}

func TestTopicsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	clusterID := b.ClusterID()
	orders, err := b.CreateTopic(TopicSpec{Name: "orders", Partitions: 3, Configs: map[string]string{"retention.ms": "1000"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(TopicSpec{Name: "gone", Partitions: 1}, false); err != nil {
		t.Fatal(err)
	}
	p, _ := orders.Partition(2)
	if _, _, err := p.Produce(batchOf("a", "b"), -1); err != nil {
		t.Fatal(err)
	}
	if err := b.CreatePartitions("orders", 5, false); err != nil {
		t.Fatal(err)
	}
	retention := "2000"
	if err := b.AlterTopicConfigs("orders", map[string]*string{"retention.ms": &retention, "segment.bytes": nil}, true, false); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openTestBroker(t, dir)
	defer b.Close()
	if b.ClusterID() != clusterID {
		t.Errorf("cluster id changed across restart: %s -> %s", clusterID, b.ClusterID())
	}
	if _, err := b.Topic("gone"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("deleted topic is back: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !os.IsNotExist(err) {
		t.Errorf("deleted topic's directory remains: %v", err)
	}
	orders, err = b.Topic("orders")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(orders.Partitions()); n != 5 {
		t.Errorf("partitions after restart = %d, want 5", n)
	}
	if v := orders.currentConfig().value("retention.ms"); v != "2000" {
		t.Errorf("retention.ms after restart = %s, want 2000", v)
	}
	p, _ = orders.Partition(2)
	if got := readValues(t, p); fmt.Sprint(got) != "[a b]" {
		t.Errorf("records after restart = %v", got)
	}
}

func TestCreateTopicRejectsBadInput(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	cases := []struct {
		spec TopicSpec
		want error
	}{
		{TopicSpec{Name: "bad name", Partitions: 1}, ErrInvalidTopic},
		{TopicSpec{Name: "..", Partitions: 1}, ErrInvalidTopic},
		{TopicSpec{Name: "t", Partitions: maxPartitions + 1}, ErrInvalidPartitions},
		{TopicSpec{Name: "t", Configs: map[string]string{"no.such.config": "1"}}, ErrInvalidConfig},
		{TopicSpec{Name: "t", Configs: map[string]string{"retention.ms": "soon"}}, ErrInvalidConfig},
		{TopicSpec{Name: "t", Configs: map[string]string{"min.insync.replicas": "0"}}, ErrInvalidConfig},
		{TopicSpec{Name: "t", Configs: map[string]string{"preallocate": "true"}}, ErrInvalidConfig},
	}
	for _, c := range cases {
		if _, err := b.CreateTopic(c.spec, false); !errors.Is(err, c.want) {
			t.Errorf("CreateTopic(%+v) = %v, want %v", c.spec, err, c.want)
		}
	}
	if _, err := b.CreateTopic(TopicSpec{Name: "t"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(TopicSpec{Name: "t"}, false); !errors.Is(err, ErrTopicExists) {
		t.Errorf("second create = %v, want ErrTopicExists", err)
	}
	if err := b.CreatePartitions("t", 1, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Errorf("CreatePartitions to the same count = %v", err)
	}
}

func TestValidateOnlyChangesNothing(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	if _, err := b.CreateTopic(TopicSpec{Name: "v", Partitions: 2}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Topic("v"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("validate-only create made the topic: %v", err)
	}
}

func TestAutoCreate(t *testing.T) {
	b := openTestBroker(t, t.TempDir(), func(c *Config) { c.DefaultPartitions = 3 })
	defer b.Close()
	tp, err := b.TopicOrCreate("auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tp.Partitions()); n != 3 {
		t.Errorf("auto-created partitions = %d, want num.partitions 3", n)
	}

	off := false
	b2 := openTestBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopics = &off })
	defer b2.Close()
	if _, err := b2.TopicOrCreate("auto"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("auto-create disabled: %v", err)
	}
}

func TestProduceValidates(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "v", Configs: map[string]string{"max.message.bytes": "200"}}, false)
	p, _ := tp.Partition(0)

	corrupt := batchOf("x")
	corrupt[len(corrupt)-1] ^= 0xff
	if _, _, err := p.Produce(corrupt, -1); !errors.Is(err, ErrCorruptMessage) {
		t.Errorf("corrupt batch: %v", err)
	}
	big := batchOf(string(make([]byte, 300)))
	if _, _, err := p.Produce(big, -1); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("oversized batch: %v", err)
	}
	v1 := batchOf("x")
	v1[magicOffset] = 1
	if _, _, err := p.Produce(v1, 1); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("message format v1: %v", err)
	}
	if _, _, err := p.Produce(nil, 1); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("empty payload: %v", err)
	}
	if p.EndOffset() != 0 {
		t.Errorf("rejected batches were written: end offset %d", p.EndOffset())
	}
	two := append(batchOf("a", "b"), batchOf("c")...)
	base, _, err := p.Produce(two, -1)
	if err != nil || base != 0 {
		t.Fatalf("Produce two batches = %d, %v", base, err)
	}
	if got := readValues(t, p); fmt.Sprint(got) != "[a b c]" {
		t.Errorf("records = %v", got)
	}
	if _, err := p.Read(10, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("read past the end: %v", err)
	}
}

func TestLogAppendTime(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "lat", Configs: map[string]string{"message.timestamp.type": "LogAppendTime"}}, false)
	p, _ := tp.Partition(0)
	before := time.Now().UnixMilli()
	_, ts, err := p.Produce(batchOf("a"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if ts < before || ts > time.Now().UnixMilli() {
		t.Errorf("log append time %d outside the produce call", ts)
	}
}

func TestNotifyWakesOnAppend(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "n"}, false)
	p, _ := tp.Partition(0)
	wake := make(chan struct{}, 1)
	p.Notify(wake)
	if _, _, err := p.Produce(batchOf("a"), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after append")
	}
	p.Notify(wake)
	p.Unnotify(wake)
	p.Produce(batchOf("b"), 1)
	select {
	case <-wake:
		t.Fatal("woken after Unnotify")
	default:
	}
}

func TestConcurrentDurableProduce(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "c"}, false)
	p, _ := tp.Partition(0)
	const writers, each = 8, 20
	var wg sync.WaitGroup
	offsets := make(chan int64, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				off, _, err := p.Produce(batchOf("x"), -1)
				if err != nil {
					t.Error(err)
					return
				}
				offsets <- off
			}
		}()
	}
	wg.Wait()
	close(offsets)
	seen := map[int64]bool{}
	for off := range offsets {
		if seen[off] {
			t.Fatalf("offset %d given twice", off)
		}
		seen[off] = true
	}
	if len(seen) != writers*each || p.EndOffset() != writers*each {
		t.Errorf("got %d offsets, end offset %d", len(seen), p.EndOffset())
	}
}

func TestCorruptPartitionGoesOffline(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp, _ := b.CreateTopic(TopicSpec{Name: "bad", Partitions: 2}, false)
	for _, p := range tp.Partitions() {
		for i := 0; i < 3; i++ {
			if _, _, err := p.Produce(batchOf("some value"), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Simulate an unclean stop by closing the logs without the broker,
	// then flip a byte inside the first of three batches of partition 0.
	b.Close()
	os.Remove(filepath.Join(dir, "bad-0", "clean-shutdown"))
	os.Remove(filepath.Join(dir, "bad-0", "recovery-point"))
	seg := filepath.Join(dir, "bad-0", fmt.Sprintf("%020d.log", 0))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[record.HeaderSize+5] ^= 0x40
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}

	b = openTestBroker(t, dir)
	defer b.Close()
	tp, err = b.Topic("bad")
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := tp.Partition(0)
	var corrupt *seglog.CorruptionError
	if !errors.As(p0.Offline(), &corrupt) {
		t.Fatalf("partition 0 offline error = %v, want a CorruptionError", p0.Offline())
	}
	if _, _, err := p0.Produce(batchOf("x"), -1); !errors.Is(err, ErrStorage) {
		t.Errorf("produce to offline partition: %v", err)
	}
	if _, err := p0.Read(0, 100); !errors.Is(err, ErrStorage) {
		t.Errorf("read from offline partition: %v", err)
	}
	p1, _ := tp.Partition(1)
	if p1.Offline() != nil || len(readValues(t, p1)) != 3 {
		t.Errorf("the healthy partition was affected: %v", p1.Offline())
	}
}

func TestDeleteBefore(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "d"}, false)
	p, _ := tp.Partition(0)
	for i := 0; i < 4; i++ {
		p.Produce(batchOf("v"), 1)
	}
	if _, err := p.DeleteBefore(9); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("DeleteBefore past the end: %v", err)
	}
	low, err := p.DeleteBefore(-1)
	if err != nil || low != 4 || p.StartOffset() != 4 {
		t.Errorf("DeleteBefore(-1) = %d, %v; start %d", low, err, p.StartOffset())
	}
}

func TestDefinitionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	defs := b.Definitions()
	for _, kv := range [][2]string{{"t/q/a", "1"}, {"t/q/b", "2"}, {"t/q/a", "3"}, {"t/e/x", ""}} {
		if err := defs.Put(kv[0], []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := defs.Delete("t/q/b"); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b = openTestBroker(t, dir)
	defer b.Close()
	var got []string
	b.Definitions().Load(func(k string, v []byte) error {
		if strings.HasPrefix(k, "t/") { // the message-queue core keeps its own keys here too
			got = append(got, k+"="+string(v))
		}
		return nil
	})
	if want := "[t/e/x= t/q/a=3]"; fmt.Sprint(got) != want {
		t.Errorf("definitions after restart = %v, want %v", got, want)
	}
}
