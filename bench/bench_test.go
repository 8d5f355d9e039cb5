package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// The benchmarks run only with -bench, e.g.
//
//	go test -run '^$' -bench . -benchtime 5s ./bench/
//	go test -run '^$' -bench Produce -cpuprofile cpu.out ./bench/
//
// MB/s is payload bytes (1 KiB record values) per second.

var benchFillMiB = flag.Int64("bench.fill-mib", 256, "MiB written to each fetch topic before the fetch benchmarks")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	fetchFixtures.close()
	os.Exit(code)
}

func BenchmarkProduceAcksAll1Partition(b *testing.B)  { benchProduceSetups(b, 1) }
func BenchmarkProduceAcksAll8Partitions(b *testing.B) { benchProduceSetups(b, 8) }

// benchProduceSetups runs benchProduce for each producer setup:
// .../default (franz-go defaults) and .../inflight5 (not idempotent, five
// requests in flight).
func benchProduceSetups(b *testing.B, partitions int32) {
	for _, setup := range producerSetups {
		b.Run(setup.key, func(b *testing.B) { benchProduce(b, partitions, setup) })
	}
}

// benchProduce produces b.N 1 KiB records with acks=all to a new topic on a
// new node whose data directory is under b.TempDir(). The node's log is
// dropped: benchmarks print everything logged through b.
func benchProduce(b *testing.B, partitions int32, setup producerSetup) {
	quiet := nodetest.WithConfig(func(c *node.Config) { c.Logger = slog.New(slog.DiscardHandler) })
	w, err := attachWharf(nodetest.Start(b, quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer w.closeAdmin()
	const topic = "bench-produce"
	if err := w.createTopic(topic, partitions); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(recordSize)
	r, stats, err := produce(w.addr, topic, setup, forRecords(int64(b.N)), b.ResetTimer)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.recordsPerSec(), "records/s")
	b.ReportMetric(float64(stats.meanBatchBytes()), "B/batch")
	b.ReportMetric(float64(stats.meanRequestBytes()), "B/request")
}

func BenchmarkFetchWarmTail1Partition(b *testing.B)  { benchFetchSetups(b, 1) }
func BenchmarkFetchWarmTail8Partitions(b *testing.B) { benchFetchSetups(b, 8) }

// benchFetchSetups runs benchFetch for each consumer setup: franz-go with
// default and larger per-partition fetch sizes, and the minimal client
// that does not decode records (raw, raw-8MiB).
func benchFetchSetups(b *testing.B, partitions int32) {
	for _, setup := range consumerSetups {
		b.Run(setup.key, func(b *testing.B) { benchFetch(b, partitions, setup) })
	}
}

// benchFetch reads b.N records from a topic filled once per test binary
// (-bench.fill-mib), wrapping to the start when it reaches the end.
func benchFetch(b *testing.B, partitions int32, setup consumerSetup) {
	f, err := fetchFixtures.get(partitions)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(recordSize)
	b.ResetTimer()
	r, err := readTopic(f.w.addr, f.topic, f.ends, setup, forRecords(int64(b.N)))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.recordsPerSec(), "records/s")
}

// BenchmarkDiskFsyncPerChunk is the durable-write baseline: each op writes
// one chunk to a file in b.TempDir() and fsyncs it.
func BenchmarkDiskFsyncPerChunk(b *testing.B) {
	for _, chunk := range []int64{16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		b.Run(strings.ReplaceAll(sizeString(chunk), " ", ""), func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(chunk)
			b.ResetTimer()
			if _, err := diskFsyncPerChunk(dir, chunk*int64(b.N), chunk, 0); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkDiskGroupCommit is the group-commit baseline: each op is one
// chunk written to a preallocated file in b.TempDir() while up to 5 chunks
// await the fdatasync rounds that run back to back.
func BenchmarkDiskGroupCommit(b *testing.B) {
	for _, chunk := range []int64{1 << 10, 16 << 10, 64 << 10, 1 << 20} {
		b.Run(strings.ReplaceAll(sizeString(chunk), " ", ""), func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(chunk)
			b.ResetTimer()
			_, rounds, err := diskGroupCommit(dir, chunk*int64(b.N), chunk, groupCommitInFlight, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/float64(max(rounds, 1)), "chunks/fsync")
		})
	}
}

// BenchmarkDiskStreaming is the disk's streaming figure: each op is a 1 MiB
// write, with an fsync every 64 MiB and at the end.
func BenchmarkDiskStreaming(b *testing.B) {
	dir := b.TempDir()
	b.SetBytes(streamWriteSize)
	b.ResetTimer()
	if _, err := diskStreaming(dir, forRecords(int64(b.N)*streamWriteSize)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoopbackTCP is the network baseline: each op is 1 MiB sent over
// 127.0.0.1 and read by another goroutine.
func BenchmarkLoopbackTCP(b *testing.B) {
	b.SetBytes(streamWriteSize)
	b.ResetTimer()
	if _, err := loopbackTCP(forRecords(int64(b.N) * streamWriteSize)); err != nil {
		b.Fatal(err)
	}
}

// fetchFixture is a filled topic on the shared fetch node.
type fetchFixture struct {
	w     *wharf
	topic string
	ends  map[int32]int64
}

// fetchFixtureSet starts one node for all fetch benchmarks and fills one
// topic per partition count on first use: testing.B calls a benchmark
// function several times with growing b.N, and refilling each time would
// dominate the run. TestMain closes it.
type fetchFixtureSet struct {
	mu       sync.Mutex
	dir      string
	w        *wharf
	fixtures map[int32]*fetchFixture
}

var fetchFixtures fetchFixtureSet

func (s *fetchFixtureSet) get(partitions int32) (*fetchFixture, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.fixtures[partitions]; ok {
		return f, nil
	}
	if s.w == nil {
		dir, err := os.MkdirTemp("", "wharf-bench-fetch-")
		if err != nil {
			return nil, err
		}
		s.dir = dir
		w, err := startWharf(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		s.w = w
		s.fixtures = make(map[int32]*fetchFixture)
	}
	topic := fmt.Sprintf("bench-fetch-%dp", partitions)
	if err := s.w.createTopic(topic, partitions); err != nil {
		return nil, err
	}
	if err := prefill(s.w.addr, topic, *benchFillMiB<<20); err != nil {
		return nil, err
	}
	ends, err := s.w.endOffsets(topic)
	if err != nil {
		return nil, err
	}
	f := &fetchFixture{w: s.w, topic: topic, ends: ends}
	// One full read so the measured reads start warm.
	if _, err := fetch(f.w.addr, topic, ends, nil, forRecords(totalRecords(ends))); err != nil {
		return nil, err
	}
	s.fixtures[partitions] = f
	return f, nil
}

func (s *fetchFixtureSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		if err := s.w.close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: closing the fetch node:", err)
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
