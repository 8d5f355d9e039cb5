package kafka

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// BenchmarkFetch compares writing fetch responses with sendfile (zero copy)
// and with pread into the kmsg-encoded response (copy), for a few response
// sizes. Each iteration is one fetch of one partition from offset 0.
func BenchmarkFetch(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		for _, zeroCopy := range []bool{true, false} {
			name := fmt.Sprintf("bytes=%d/zerocopy=%v", size, zeroCopy)
			b.Run(name, func(b *testing.B) { benchmarkFetch(b, size, zeroCopy) })
		}
	}
}

func benchmarkFetch(b *testing.B, size int, zeroCopy bool) {
	ts := startServer(b)
	ts.createTopic(b, "bench", 1, nil)
	const batchBytes = 16 << 10
	appendBatches(b, mustPartition(b, ts, "bench", 0), size/batchBytes, batchBytes)
	ts.s.zeroCopy.Store(zeroCopy)

	c := ts.dial(b)
	req := fetchRequest(12, "bench", 0, 0)
	req.MaxBytes = int32(size)
	req.Topics[0].Partitions[0].PartitionMaxBytes = int32(size)

	// One untimed round to learn the response size.
	c.send(req)
	frame, err := c.readFrame()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	for range b.N {
		c.send(req)
		if err := discardFrame(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchTLS is one fetch of 1 MiB of one partition, as a consumer
// over an SSL listener asks for it, and the CPU the process (broker and
// client, whose decryption is about as costly as the broker's work)
// spends per MiB.
func BenchmarkFetchTLS(b *testing.B) {
	const size = 1 << 20
	ts := startServer(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	clientTLS := serveSSL(b, ts, ln)
	ts.createTopic(b, "bench", 1, nil)
	const batchBytes = 16 << 10
	appendBatches(b, mustPartition(b, ts, "bench", 0), size/batchBytes, batchBytes)

	nc, err := tls.Dial("tcp", ln.Addr().String(), clientTLS)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	c := &rawConn{t: b, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
	req := fetchRequest(12, "bench", 0, 0)
	req.MaxBytes = size
	req.Topics[0].Partitions[0].PartitionMaxBytes = size
	b.SetBytes(size)
	cpu := processCPU()
	b.ResetTimer()
	for range b.N {
		c.send(req)
		if err := discardFrame(c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/1e6/float64(b.N), "cpu-ms/MiB")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardFrame reads one response without keeping it.
func discardFrame(c *rawConn) error {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, c.r, int64(binary.BigEndian.Uint32(size[:])))
	return err
}

// BenchmarkProduce measures the produce path through a connection: the
// frame read, decoding and an acks=1 append (no fsync wait), for requests
// from one small record to 16 MiB over 8 partitions. depth requests are
// written before their responses are read, as pipelining clients do.
func BenchmarkProduce(b *testing.B) {
	for _, tc := range []struct {
		partitions, batchBytes, depth int
	}{
		{1, 100, 1},
		{1, 100, 5},
		{8, 128 << 10, 1},
		{8, 2 << 20, 1},
	} {
		name := fmt.Sprintf("request=%dx%d/depth=%d", tc.partitions, tc.batchBytes, tc.depth)
		b.Run(name, func(b *testing.B) { benchmarkProduce(b, tc.partitions, tc.batchBytes, tc.depth) })
	}
}

func benchmarkProduce(b *testing.B, partitions, batchBytes, depth int) {
	ts := startServer(b, withBrokerConfig(func(c *broker.Config) { c.Logger = slog.New(slog.DiscardHandler) }))
	ts.createTopic(b, "bench", int32(partitions), map[string]string{"retention.bytes": "67108864", "segment.bytes": "16777216"})
	c := ts.dial(b)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bench"
	batch := buildBatch(b, strings.Repeat("x", batchBytes))
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		n := min(depth, b.N-i)
		for range n {
			c.write(frame)
		}
		for range n {
			if err := discardFrame(c); err != nil {
				b.Fatal(err)
			}
		}
	}
}
