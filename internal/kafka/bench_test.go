package kafka

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"
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

// discardFrame reads one response without keeping it.
func discardFrame(c *rawConn) error {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, c.r, int64(binary.BigEndian.Uint32(size[:])))
	return err
}
