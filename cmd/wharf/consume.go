package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

func runConsume(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("consume", "TOPIC [flags]",
		"Prints a topic's records until SIGINT or until --num records were printed.\n"+
			"Without --from-beginning or --offset it starts at the end and prints new records only.\n"+
			"--format fields: %k key, %v value, %t topic, %p partition, %o offset,\n"+
			"%T timestamp (ms), %h headers (k=v,...), %% percent; escapes \\n \\t \\\\.", std.err)
	bootstrap, env := addBootstrapFlag(fs)
	fromBeginning := fs.Bool("from-beginning", false, "start at each partition's first offset")
	offset := fs.Int64("offset", -1, "start at this offset (in every partition unless --partition)")
	partition := fs.Int("partition", -1, "consume only this partition (default: all)")
	num := fs.Int("num", 0, "exit after printing this many records (0: run until interrupted)")
	format := fs.String("format", `%v\n`, "output format per record")
	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	if err := expectArgs(positional, 1, "topic name"); err != nil {
		return err
	}
	topic := positional[0]
	if *fromBeginning && *offset >= 0 {
		return usagef("--from-beginning and --offset exclude each other")
	}
	if *num < 0 {
		return usagef("--num must not be negative")
	}
	recFormat, err := parseRecordFormat(*format)
	if err != nil {
		return usagef("--format: %v", err)
	}

	start := kgo.NewOffset().AtEnd()
	switch {
	case *fromBeginning:
		start = kgo.NewOffset().AtStart()
	case *offset >= 0:
		start = kgo.NewOffset().At(*offset)
	}
	var opts []kgo.Opt
	if *partition >= 0 {
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {int32(*partition): start},
		}))
	} else {
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
	}
	cl, err := newKafkaClient(*bootstrap, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriter(std.out)
	defer out.Flush()
	var (
		buf     []byte
		printed int
	)
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil // interrupted: a normal way to stop consuming
		}
		for _, e := range fetches.Errors() {
			if errors.Is(e.Err, context.Canceled) {
				continue
			}
			fmt.Fprintf(std.err, "wharf: consume %s[%d]: %v\n", e.Topic, e.Partition, e.Err)
		}
		iter := fetches.RecordIter()
		for !iter.Done() {
			buf = recFormat.appendRecord(buf[:0], iter.Next())
			if _, err := out.Write(buf); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			printed++
			if *num > 0 && printed == *num {
				return out.Flush()
			}
		}
		// Flush per poll so records appear as they arrive.
		if err := out.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
}
