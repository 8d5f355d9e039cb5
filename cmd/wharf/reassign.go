package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition reassignment from the command line: `wharf topics reassign`
// starts one (Kafka's AlterPartitionReassignments, as
// kafka-reassign-partitions.sh --execute does), `wharf cluster status`
// lists those in progress, and `wharf cluster remove-node` moves every
// replica off a node with them before it removes the node.

func defineTopicsReassign(fs *flag.FlagSet) func(kafkaEnv, []string) error {
	partition := fs.Int("partition", -1, "the partition to move")
	replicas := fs.String("replicas", "", "the node ids to move it to, as `ID,ID,...`, the preferred leader first")
	return func(env kafkaEnv, topics []string) error {
		if err := expectArgs(topics, 1, "topic name"); err != nil {
			return err
		}
		if *partition < 0 {
			return usagef("--partition is required")
		}
		ids, err := parseNodeIDs(*replicas)
		if err != nil {
			return err
		}
		if err := env.reachable(); err != nil {
			return err
		}
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topics[0], int32(*partition), ids)
		if err := alterAssignments(env.ctx, env.adm, req); err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.out, "Moving %s-%d to nodes %s; `wharf cluster status` lists it until it is done.\n",
			topics[0], *partition, joinIDs(ids))
		return err
	}
}

// parseNodeIDs parses ID,ID,...
func parseNodeIDs(s string) ([]int32, error) {
	if s == "" {
		return nil, usagef("--replicas is required")
	}
	var ids []int32
	for _, item := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(item), 10, 32)
		if err != nil || id <= 0 {
			return nil, usagef("--replicas: %q is not a node id", item)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// alterAssignments sends req and fails with every partition's refusal.
func alterAssignments(ctx context.Context, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) error {
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	var errs []error
	for _, ps := range resp {
		for _, p := range ps {
			if p.Err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %v: %s", p.Topic, p.Partition, p.Err, p.ErrMessage))
			}
		}
	}
	return errors.Join(errs...)
}

// listReassignments lists every reassignment in progress.
func listReassignments(ctx context.Context, cl kmsg.Requestor) ([]kmsg.ListPartitionReassignmentsResponseTopic, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest() // no topics: all of them
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp.Topics, nil
}

// printReassignments prints the reassignments in progress, if any.
func printReassignments(out io.Writer, topics []kmsg.ListPartitionReassignmentsResponseTopic) {
	for _, t := range topics {
		for _, p := range t.Partitions {
			fmt.Fprintf(out, "reassigning %s-%d: replicas %s, adding %s, removing %s\n", t.Topic, p.Partition,
				joinIDs(p.Replicas), joinIDs(p.AddingReplicas), joinIDs(p.RemovingReplicas))
		}
	}
}

// waitReassignments waits until none of the moves is in progress,
// printing how many are left whenever that changes.
func waitReassignments(ctx context.Context, cl *kgo.Client, out io.Writer, moves int) error {
	left := -1
	for {
		topics, err := listReassignments(ctx, cl)
		if err == nil {
			n := 0
			for _, t := range topics {
				n += len(t.Partitions)
			}
			if n != left {
				left = n
				fmt.Fprintf(out, "%d of %d partitions moved\n", moves-min(n, moves), moves)
			}
			if n == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the partitions to move: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// moveOff plans moving every replica on node off it: each partition
// that has one gets, in its place, the node holding fewest replicas
// among those it lacks. It fails, naming the partitions, when some
// partition has no node left to move to.
func moveOff(md kadm.Metadata, node int32) (kadm.AlterPartitionAssignmentsReq, int, error) {
	load := map[int32]int{}
	for _, b := range md.Brokers {
		if b.NodeID != node {
			load[b.NodeID] = 0
		}
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				if _, ok := load[r]; ok {
					load[r]++
				}
			}
		}
	}
	var (
		req      kadm.AlterPartitionAssignmentsReq
		moves    int
		stranded []string
	)
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			i := slices.Index(p.Replicas, node)
			if i < 0 {
				continue
			}
			to := int32(-1)
			for id, n := range load {
				if !slices.Contains(p.Replicas, id) && (to < 0 || n < load[to] || n == load[to] && id < to) {
					to = id
				}
			}
			if to < 0 {
				stranded = append(stranded, fmt.Sprintf("%s-%d (replicas %s)", t.Topic, p.Partition, joinIDs(p.Replicas)))
				continue
			}
			load[to]++
			replicas := slices.Clone(p.Replicas)
			replicas[i] = to
			req.Assign(t.Topic, p.Partition, replicas)
			moves++
		}
	}
	if len(stranded) > 0 {
		return nil, 0, fmt.Errorf("node %d cannot be removed: no other node is up to take its replica of %s, which would fall below its replication factor",
			node, strings.Join(stranded, ", "))
	}
	return req, moves, nil
}
