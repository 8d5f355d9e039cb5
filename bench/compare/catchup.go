package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// catchupRecordSize is the record size of the catch-up workload.
const catchupRecordSize = 1024

// catchupResult is one broker's catch-up figures and how its page cache was
// emptied before the read.
type catchupResult struct {
	f       figures
	evicted string
	err     error
}

// runCatchup writes total bytes of 1 KiB records (acks=1) to a new topic of
// partitions partitions on the broker at addr, whose process is pid and
// whose files are under dataDir; writes back and drops the page cache; then
// consumes every record from offset 0 with one franz-go consumer (defaults:
// up to 1 MiB per partition, 50 MiB per fetch). Figures: records consumed
// per second ("rate"), MB/s of record values ("mbps"), the fill's MB/s
// ("fillmbps"), the server's resident memory after the fill ("rss", MiB)
// and its CPU during the read ("cpu", cores busy).
func (s *suite) runCatchup(ctx context.Context, addr, dataDir string, pid int, partitions int32, total int64) catchupResult {
	topic := s.uniqueName("catchup")
	fillStart := time.Now()
	records, err := fillTopic(ctx, addr, topic, partitions, catchupRecordSize, total)
	if err != nil {
		return catchupResult{err: fmt.Errorf("fill: %w", err)}
	}
	fillSecs := time.Since(fillStart).Seconds()
	rss, err := residentMiB(pid)
	if err != nil {
		return catchupResult{err: err}
	}
	evicted, err := dropPageCache(dataDir)
	if err != nil {
		return catchupResult{err: err}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return catchupResult{err: err}
	}
	defer cl.Close()
	readCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cpu0, err := processCPUSeconds(pid)
	if err != nil {
		return catchupResult{err: err}
	}
	start := time.Now()
	var consumed int64
	for consumed < records {
		fs := cl.PollFetches(readCtx)
		if err := fetchError(fs); err != nil {
			return catchupResult{err: fmt.Errorf("consume after %d of %d records: %w", consumed, records, err)}
		}
		consumed += int64(fs.NumRecords())
	}
	secs := time.Since(start).Seconds()
	cpu1, err := processCPUSeconds(pid)
	if err != nil {
		return catchupResult{err: err}
	}
	bytes := float64(records * catchupRecordSize)
	return catchupResult{evicted: evicted, f: figures{
		"rate":     float64(records) / secs,
		"mbps":     bytes / secs / 1e6,
		"fillmbps": bytes / fillSecs / 1e6,
		"cpu":      (cpu1 - cpu0) / secs,
		"rss":      rss,
	}}
}

// fetchError is the first error of a poll, or nil. franz-go retries
// retriable errors itself; what it returns stops the read.
func fetchError(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(topic string, partition int32, err error) {
		if first == nil {
			first = fmt.Errorf("%s[%d]: %w", topic, partition, err)
		}
	})
	return first
}
