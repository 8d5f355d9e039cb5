package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/record"
)

// startTestBareKafka serves a bare log on a free loopback port for the
// test's length.
func startTestBareKafka(t *testing.T) (addr, dir string) {
	t.Helper()
	dir = t.TempDir()
	l, err := openBareLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- serveBareKafka(ln, l) }()
	t.Cleanup(func() {
		ln.Close()
		if err := <-served; err != nil {
			t.Error(err)
		}
		l.close()
	})
	return ln.Addr().String(), dir
}

// franz-go's acks=all idempotent producer and kadm work against the bare
// log: every record is acknowledged with its offset, and is in the file.
func TestBareKafkaTakesAnIdempotentProducer(t *testing.T) {
	addr, dir := startTestBareKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(producerOpts(addr, "t", true)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 2, 1, nil, "t"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	if resp, _ := adm.CreateTopic(ctx, 1, 1, nil, "t"); !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", resp.Err)
	}
	const n = 3000
	value := make([]byte, 1024)
	offsets := map[int32][]int64{}
	for i := range n {
		r := &kgo.Record{Value: value, Partition: int32(i % 2)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
	}
	for p, offs := range offsets {
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: record %d got offset %d", p, i, o)
			}
		}
	}
	info, err := os.Stat(filepath.Join(dir, "bare.log"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() < n*1024 {
		t.Errorf("the log holds %d bytes, less than the %d of record values", info.Size(), n*1024)
	}
	if _, err := adm.DeleteTopics(ctx, "t"); err != nil {
		t.Fatal(err)
	}
}

// A batch whose CRC does not match is refused, as a broker refuses it.
func TestBareLogRefusesABadCRC(t *testing.T) {
	l, err := openBareLog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	l.topics["t"] = 1
	batch := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte("v")}})
	batch[len(batch)-1] ^= 1
	if _, _, err := l.append("t", 0, batch); bareErrorCode(err) != kerr.CorruptMessage.Code {
		t.Errorf("append of a corrupt batch: %v, want CORRUPT_MESSAGE", err)
	}
	if l.written != 0 {
		t.Errorf("%d bytes written for a refused batch", l.written)
	}
}
