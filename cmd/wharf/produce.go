package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceLinger lets records read in a burst share a batch without delaying
// an interactive line noticeably.
const produceLinger = 10 * time.Millisecond

// maxLineBytes is the longest stdin line produce accepts (one record).
const maxLineBytes = 16 << 20

func runProduce(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("produce", "TOPIC [flags]",
		"Reads stdin and produces one record per line. A line containing a TAB is\n"+
			"key<TAB>value; other lines are values without a key. Records are flushed\n"+
			"at end of input; nothing is printed on success unless -v.", std.err)
	bootstrap, env := addBootstrapFlag(fs)
	partition := fs.Int("partition", -1, "produce every record to this partition (default: by key hash, unkeyed records spread)")
	acks := fs.String("acks", "all", "acknowledgement: all (durable on the broker), 1 (written) or 0 (none)")
	verbose := fs.Bool("v", false, "print the number of records produced to stderr")
	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	if err := expectArgs(positional, 1, "topic name"); err != nil {
		return err
	}
	topic := positional[0]

	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(produceLinger),
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
	cl, err := newKafkaClient(*bootstrap, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		firstErr error
		failed   int
		produced int
	)
	done := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		produced++
	}

	lines := bufio.NewScanner(std.in)
	lines.Buffer(make([]byte, 64<<10), maxLineBytes)
	for lines.Scan() {
		r := recordFromLine(lines.Bytes())
		if *partition >= 0 {
			r.Partition = int32(*partition)
		}
		// Produce blocks when the client's buffer is full, which
		// paces stdin to the broker; it fails only on ctx or close.
		cl.Produce(ctx, r, done)
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if *verbose {
		fmt.Fprintf(std.err, "produced %d records to %s\n", produced, topic)
	}
	if firstErr != nil {
		return fmt.Errorf("%d records failed, first error: %w", failed, firstErr)
	}
	return nil
}

// recordFromLine splits key<TAB>value; a line without a TAB is an unkeyed
// value. The bytes are copied because the scanner reuses its buffer.
func recordFromLine(line []byte) *kgo.Record {
	if key, value, ok := bytes.Cut(line, []byte{'\t'}); ok {
		return &kgo.Record{Key: bytes.Clone(key), Value: bytes.Clone(value)}
	}
	return &kgo.Record{Value: bytes.Clone(line)}
}
