package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupConsumeOpts makes the client a member of o.group that reports its
// partitions to ends, starts where the group has no committed offset at
// the end (or the beginning), and commits the records it marks.
func groupConsumeOpts(o consumeOptions, ends *endTracker) []kgo.Opt {
	reset := kgo.NewOffset().AtEnd()
	if o.fromBeginning {
		reset = kgo.NewOffset().AtStart()
	}
	return []kgo.Opt{
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(reset),
		kgo.AutoCommitMarks(),
		// A rebalance waits for the records of a poll to be printed and
		// marked, so that what is committed is exactly what was printed.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
			positions, err := groupPositions(ctx, kadm.NewClient(cl), o, assigned[o.topic])
			if err != nil {
				fmt.Fprintf(ends.out, "wharf: consume %s: %v\n", o.topic, err)
				return
			}
			ends.start(positions)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			ends.forget(revoked[o.topic])
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				fmt.Fprintf(ends.out, "wharf: commit the offsets of group %s: %v\n", o.group, err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			ends.forget(lost[o.topic])
		}),
	}
}

// groupPositions is where the group member starts in each assigned
// partition, as the client decides it (the committed offset, else the
// reset offset), and where the partition ends now.
func groupPositions(ctx context.Context, adm *kadm.Client, o consumeOptions, assigned []int32) (map[int32]partitionEnd, error) {
	committed, err := adm.FetchOffsets(ctx, o.group)
	if err != nil {
		return nil, fmt.Errorf("fetch the offsets of group %s: %w", o.group, err)
	}
	firsts, lasts, err := partitionBounds(ctx, adm, o.topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]partitionEnd{}
	for _, p := range assigned {
		last, ok := lasts.Lookup(o.topic, p)
		if !ok || last.Err != nil {
			continue
		}
		pos := partitionEnd{next: last.Offset, end: last.Offset}
		if c, ok := committed.Lookup(o.topic, p); ok && c.Err == nil && c.At >= 0 {
			pos.next = c.At
		} else if first, ok := firsts.Lookup(o.topic, p); ok && first.Err == nil && o.fromBeginning {
			pos.next = first.Offset
		}
		out[p] = pos
	}
	return out, nil
}
