package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceLinger lets records read in a burst share a batch without delaying
// an interactive line noticeably.
const produceLinger = 10 * time.Millisecond

// maxLineBytes is the longest stdin line produce accepts (one record).
const maxLineBytes = 16 << 20

// progressInterval is how often a produce that is still running reports
// its count on stderr.
const progressInterval = 2 * time.Second

func runProduce(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("produce", "TOPIC [flags]",
		"Reads stdin and produces one record per line. A line containing the key separator\n"+
			"(TAB) is key<TAB>value; other lines are values without a key. Records are flushed\n"+
			"at end of input; nothing is printed on success unless -v, but a produce that runs\n"+
			"longer than "+progressInterval.String()+" prints its progress on stderr.", std.out)
	bootstrap, env := addBootstrapFlag(fs)
	topicFlag := fs.String("topic", "", "the topic, as kafka-console-producer.sh takes it (the same as TOPIC)")
	partition := fs.Int("partition", -1, "produce every record to this partition (default: by key hash, unkeyed records spread)")
	acks := fs.String("acks", "all", "acknowledgement: all (durable on the broker), 1 (written) or 0 (none)")
	keySeparator := fs.String("key-separator", "\t", "what splits a line into key and value (default: TAB; empty: no keys)")
	var headerFlags stringList
	fs.Var(&headerFlags, "header", "a header `k=v` on every record (repeatable)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on a record the broker has not acknowledged after this long (delivery.timeout.ms)")
	verbose := fs.Bool("v", false, "print the number of records produced to stderr")
	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	topic, err := oneTopic(positional, *topicFlag)
	if err != nil {
		return err
	}
	headers, err := parseHeaders(headerFlags)
	if err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("--timeout must be positive, got %v", *timeout)
	}
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(produceLinger),
		kgo.RecordDeliveryTimeout(*timeout),
		// The broker decides whether an unknown topic is created
		// (--auto-create-topics), as it does for kcat.
		kgo.AllowAutoTopicCreation(),
	}
	switch *acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		// Idempotent writes require acks=all in franz-go.
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return usagef("--acks %q: want all, 1 or 0", *acks)
	}
	if *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	seeds, err := seedAddrs(*bootstrap)
	if err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cl, err := connectKafka(setupCtx, seeds, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	partitions, err := topicPartitions(setupCtx, cl, topic, true)
	if err != nil {
		return err
	}
	if *partition >= int(partitions) {
		return noPartitionError(topic, partitions, int32(*partition))
	}

	counts := &produceCounts{started: time.Now()}
	stopProgress := make(chan struct{})
	var progress sync.WaitGroup
	progress.Go(func() { counts.report(std.err, topic, stopProgress) })
	err = produceLines(ctx, cl, std.in, lineSplitter{[]byte(*keySeparator), headers, int32(*partition)}, counts)
	close(stopProgress)
	progress.Wait()
	if err != nil {
		return err
	}
	acked, failed, firstErr := counts.result()
	if *verbose {
		fmt.Fprintf(std.err, "produced %d records to %s\n", acked, topic)
	}
	if firstErr != nil {
		return fmt.Errorf("%d records failed, first error: %w", failed, firstErr)
	}
	return nil
}

// produceLines produces a record per line of in and waits for every
// acknowledgement.
func produceLines(ctx context.Context, cl *kgo.Client, in io.Reader, split lineSplitter, counts *produceCounts) error {
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64<<10), maxLineBytes)
	for lines.Scan() {
		counts.sent()
		// Produce blocks when the client's buffer is full, which
		// paces stdin to the broker; it fails only on ctx or close.
		cl.Produce(ctx, split.record(lines.Bytes()), counts.done)
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// lineSplitter turns a stdin line into a record.
type lineSplitter struct {
	keySeparator []byte // empty: lines are values only
	headers      []kgo.RecordHeader
	partition    int32 // -1: the partitioner picks
}

// record splits key<separator>value; a line without the separator is an
// unkeyed value. The bytes are copied because the scanner reuses its
// buffer; the headers are shared, which the client only reads.
func (s lineSplitter) record(line []byte) *kgo.Record {
	r := &kgo.Record{Value: bytes.Clone(line), Headers: s.headers, Partition: s.partition}
	if len(s.keySeparator) > 0 {
		if key, value, ok := bytes.Cut(line, s.keySeparator); ok {
			r.Key, r.Value = bytes.Clone(key), bytes.Clone(value)
		}
	}
	return r
}

// parseHeaders turns --header k=v flags into record headers.
func parseHeaders(flags []string) ([]kgo.RecordHeader, error) {
	var headers []kgo.RecordHeader
	for _, h := range flags {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, usagef("--header %q: want key=value", h)
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return headers, nil
}

// produceCounts counts a produce's records as the client acknowledges
// them.
type produceCounts struct {
	started time.Time

	mu                  sync.Mutex
	read, acked, failed int
	firstErr            error
}

func (c *produceCounts) sent() {
	c.mu.Lock()
	c.read++
	c.mu.Unlock()
}

func (c *produceCounts) done(_ *kgo.Record, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed++
		if c.firstErr == nil {
			c.firstErr = err
		}
		return
	}
	c.acked++
}

func (c *produceCounts) result() (acked, failed int, firstErr error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked, c.failed, c.firstErr
}

// report prints a progress line every progressInterval until stop is
// closed.
func (c *produceCounts) report(w io.Writer, topic string, stop <-chan struct{}) {
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			c.mu.Lock()
			read, acked, failed := c.read, c.acked, c.failed
			c.mu.Unlock()
			rate := float64(acked) / now.Sub(c.started).Seconds()
			fmt.Fprintf(w, "wharf: produce %s: %d records acknowledged (%.0f/s), %d waiting, %d failed\n",
				topic, acked, rate, read-acked-failed, failed)
		}
	}
}
