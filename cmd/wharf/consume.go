package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOptions are consume's flags after parsing.
type consumeOptions struct {
	topic         string
	fromBeginning bool
	offset        int64 // -1: not given
	partition     int32 // -1: all
	group         string
	num           int
	exitAtEnd     bool
	timeout       time.Duration // 0: wait for records forever
	format        recordFormat
}

func runConsume(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("consume", "TOPIC [flags]",
		"Prints a topic's records until SIGINT, until --num records were printed, at the end\n"+
			"with --exit-at-end, or when no record came for --timeout. Without --from-beginning\n"+
			"or --offset it starts at the end and prints new records only. With --group it\n"+
			"consumes as a member of that consumer group, from the group's committed offsets,\n"+
			"and commits what it printed. A notice on stderr says when it waits at the end of\n"+
			"a partition.\n"+
			"--format fields: %k key, %v value, %t topic, %p partition, %o offset,\n"+
			"%T timestamp (ms), %h headers (k=v,...), %% percent; escapes \\n \\t \\\\.", std.out)
	bootstrap, env := addBootstrapFlag(fs)
	topicFlag := fs.String("topic", "", "the topic, as kafka-console-consumer.sh takes it (the same as TOPIC)")
	fromBeginning := fs.Bool("from-beginning", false, "start at each partition's first offset (with --group: where the group has no committed offset)")
	offset := fs.Int64("offset", -1, "start at this offset, in every partition unless --partition (default: the end)")
	partition := fs.Int("partition", -1, "consume only this partition (default: all)")
	group := fs.String("group", "", "consume as a member of this consumer group, committing the records printed")
	num := fs.Int("num", 0, "exit after printing this many records (0: no limit)")
	exitAtEnd := fs.Bool("exit-at-end", false, "exit once every partition has been read to its end (kcat's -e)")
	timeout := fs.Duration("timeout", 0, "fail when no record has come for this long (kafka-console-consumer.sh's --timeout-ms; 0: wait forever)")
	format := fs.String("format", `%v\n`, "output format per record")
	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	o := consumeOptions{fromBeginning: *fromBeginning, offset: *offset, partition: int32(*partition),
		group: *group, num: *num, exitAtEnd: *exitAtEnd, timeout: *timeout}
	if o.topic, err = oneTopic(positional, *topicFlag); err != nil {
		return err
	}
	switch {
	case o.fromBeginning && o.offset >= 0:
		return usagef("--from-beginning and --offset exclude each other")
	case o.group != "" && (o.offset >= 0 || o.partition >= 0):
		return usagef("--group starts from the group's committed offsets and takes the partitions the group assigns: it excludes --offset and --partition")
	case o.num < 0:
		return usagef("--num must not be negative")
	case o.timeout < 0:
		return usagef("--timeout must not be negative")
	}
	if o.format, err = parseRecordFormat(*format); err != nil {
		return usagef("--format: %v", err)
	}
	seeds, err := seedAddrs(*bootstrap)
	if err != nil {
		return err
	}
	return consume(ctx, seeds, o, std)
}

// consume checks that what the options name exists, then prints records.
func consume(ctx context.Context, seeds kafkaSeeds, o consumeOptions, std stdio) error {
	setupCtx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	admin, err := connectKafka(setupCtx, seeds)
	if err != nil {
		return err
	}
	defer admin.Close()
	partitions, err := topicPartitions(setupCtx, admin, o.topic, false)
	if err != nil {
		return err
	}
	if o.partition >= partitions {
		return noPartitionError(o.topic, partitions, o.partition)
	}
	ends := newEndTracker(std.err, o.topic, o.exitAtEnd)
	var opts []kgo.Opt
	if o.group == "" {
		starts, err := startOffsets(setupCtx, kadm.NewClient(admin), o, partitions)
		if err != nil {
			return err
		}
		consumeFrom := map[int32]kgo.Offset{}
		for p, pos := range starts {
			consumeFrom[p] = kgo.NewOffset().At(pos.next)
		}
		ends.start(starts)
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: consumeFrom}))
	} else {
		opts = append(opts, groupConsumeOpts(o, ends)...)
	}
	// Control records (transaction markers) take offsets too: the
	// consumer sees them to know when it has reached the end.
	opts = append(opts, kgo.KeepControlRecords())
	cl, err := newKafkaClient(seeds, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	printErr := printRecords(ctx, cl, o, ends, std)
	if o.group == "" {
		return printErr
	}
	// Commit what was printed before leaving the group, even after
	// Ctrl-C, so that the group's next member resumes after it.
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminTimeout)
	defer cancel()
	commitErr := cl.CommitMarkedOffsets(commitCtx)
	cl.AllowRebalance()
	if commitErr != nil {
		commitErr = fmt.Errorf("commit the offsets of group %s: %w", o.group, commitErr)
	}
	return errors.Join(printErr, commitErr)
}

// startOffsets is where a consumer outside a group starts in each
// partition, and where that partition ends now. An --offset outside a
// partition's records is an error: it does not exist.
func startOffsets(ctx context.Context, adm *kadm.Client, o consumeOptions, partitions int32) (map[int32]partitionEnd, error) {
	firsts, lasts, err := partitionBounds(ctx, adm, o.topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]partitionEnd{}
	for p := range partitions {
		if o.partition >= 0 && p != o.partition {
			continue
		}
		first, ok1 := firsts.Lookup(o.topic, p)
		last, ok2 := lasts.Lookup(o.topic, p)
		switch {
		case !ok1 || !ok2:
			return nil, fmt.Errorf("%s[%d]: no offsets listed", o.topic, p)
		case first.Err != nil || last.Err != nil:
			return nil, fmt.Errorf("%s[%d]: %w", o.topic, p, errors.Join(first.Err, last.Err))
		}
		pos := partitionEnd{next: last.Offset, end: last.Offset}
		switch {
		case o.fromBeginning:
			pos.next = first.Offset
		case o.offset >= 0:
			if err := offsetExists(o.topic, p, o.offset, first.Offset, last.Offset); err != nil {
				return nil, err
			}
			pos.next = o.offset
		}
		out[p] = pos
	}
	return out, nil
}

// partitionBounds lists the first offset and the end (high watermark)
// of each of topic's partitions.
func partitionBounds(ctx context.Context, adm *kadm.Client, topic string) (firsts, ends kadm.ListedOffsets, err error) {
	if firsts, err = adm.ListStartOffsets(ctx, topic); err != nil {
		return nil, nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	if ends, err = adm.ListEndOffsets(ctx, topic); err != nil {
		return nil, nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	return firsts, ends, nil
}

// offsetExists checks that offset is one a consumer can start at: a
// record's, or the end, where it waits for the next record.
func offsetExists(topic string, p int32, offset, first, end int64) error {
	if offset >= first && offset <= end {
		return nil
	}
	if first == end {
		return fmt.Errorf("%s[%d] has no offset %d: it holds no records, and the next one will be at offset %d", topic, p, offset, end)
	}
	return fmt.Errorf("%s[%d] has no offset %d: its records are at offsets %d to %d", topic, p, offset, first, end-1)
}

// printRecords polls and prints records until the options say to stop:
// nil when interrupted, at --num records or at the end with
// --exit-at-end; an error when --timeout passes without a record.
func printRecords(ctx context.Context, cl *kgo.Client, o consumeOptions, ends *endTracker, std stdio) error {
	out := bufio.NewWriter(std.out)
	defer out.Flush()
	var (
		buf        []byte
		printed    int
		lastRecord = time.Now()
	)
	for {
		if o.exitAtEnd && ends.allAtEnd() {
			return out.Flush()
		}
		pollCtx, cancel := context.WithCancel(ctx)
		if o.timeout > 0 {
			pollCtx, cancel = context.WithDeadline(ctx, lastRecord.Add(o.timeout))
		}
		ends.setWake(cancel)
		fetches := cl.PollFetches(pollCtx)
		ends.setWake(nil)
		timedOut := errors.Is(pollCtx.Err(), context.DeadlineExceeded)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return out.Flush() // interrupted: a normal way to stop consuming
		}
		for _, e := range fetches.Errors() {
			if deniedError(e.Err) {
				return fmt.Errorf("consume %s[%d]: %w", e.Topic, e.Partition, e.Err) // retrying cannot help
			}
			if !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) {
				fmt.Fprintf(std.err, "wharf: consume %s[%d]: %v\n", e.Topic, e.Partition, e.Err)
			}
		}
		var (
			err  error
			done []*kgo.Record // this poll's records, to mark for the group once printed
		)
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				if err != nil || (o.num > 0 && printed == o.num) {
					return
				}
				ends.consumed(p.Partition, r.Offset+1, p.HighWatermark)
				done = append(done, r)
				if r.Attrs.IsControl() {
					continue
				}
				buf = o.format.appendRecord(buf[:0], r)
				_, err = out.Write(buf)
				printed++
				lastRecord = time.Now()
			}
		})
		if err == nil {
			// Flush per poll so records appear as they arrive.
			err = out.Flush()
		}
		if err != nil {
			// Nothing of this poll is marked: the group commits only
			// records that reached the output.
			return fmt.Errorf("write output: %w", err)
		}
		if o.group != "" {
			cl.MarkCommitRecords(done...)
		}
		if o.num > 0 && printed == o.num {
			return nil
		}
		ends.notice()
		cl.AllowRebalance()
		if timedOut && time.Since(lastRecord) >= o.timeout {
			return fmt.Errorf("no record came for %v (--timeout)", o.timeout)
		}
	}
}
