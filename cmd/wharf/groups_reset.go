package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/wharf-mq/wharf/internal/offsetreset"
)

func defineGroupsResetOffsets(fs *flag.FlagSet) func(groupsEnv, []string) error {
	var topics stringList
	fs.Var(&topics, "topic", "`topic` to reset, optionally with partitions: T or T:0,1,2 (repeatable)")
	allTopics := fs.Bool("all-topics", false, "reset every topic the group has committed offsets for")
	fs.Bool("to-earliest", false, "reset to the log start offset")
	fs.Bool("to-latest", false, "reset to the log end offset")
	fs.Int64("to-offset", 0, "reset to this offset (moved into the log's range if outside it)")
	fs.Int64("shift-by", 0, "move the committed offset by N (negative: back)")
	fs.String("to-datetime", "", "reset to the first record at or after this time: 2026-10-20T09:00:00.000, local time unless a zone follows (Z, +01:00)")
	fs.String("by-duration", "", "reset to the first record at or after now minus this ISO-8601 duration, e.g. PT1H or P1DT12H")
	execute := fs.Bool("execute", false, "apply the plan (without it, only print it)")
	return func(env groupsEnv, args []string) error {
		if err := expectArgs(args, 1, "group name"); err != nil {
			return err
		}
		group := args[0]
		mode, err := resetModeFromFlags(fs, env.now())
		if err != nil {
			return err
		}
		if len(topics) == 0 && !*allTopics {
			return usagef("name the partitions to reset: --topic T[:P,P...] (repeatable) or --all-topics")
		}
		if err := env.reachable(); err != nil {
			return err
		}
		if err := requireInactive(env, group); err != nil {
			return err
		}
		committed, err := env.adm.FetchOffsets(env.ctx, group)
		if err != nil {
			return fmt.Errorf("fetch offsets of %s: %w", group, err)
		}
		parts, err := resetPartitions(env, topics, *allTopics, committed)
		if err != nil {
			return err
		}
		plan, err := planReset(env, mode, parts, committed)
		if err != nil {
			return err
		}
		if err := printResetPlan(env, group, plan); err != nil {
			return err
		}
		if !*execute {
			fmt.Fprintln(env.out, "\nDry run: nothing was changed. Add --execute to commit these offsets.")
			return nil
		}
		return applyReset(env, group, plan)
	}
}

// resetModeFromFlags reads the one reset mode given.
func resetModeFromFlags(fs *flag.FlagSet, now time.Time) (offsetreset.Mode, error) {
	var modes []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(offsetreset.Modes, f.Name) {
			modes = append(modes, f.Name)
		}
	})
	if len(modes) != 1 {
		return offsetreset.Mode{}, usagef("give exactly one of --%s (got %d)", strings.Join(offsetreset.Modes, ", --"), len(modes))
	}
	value := fs.Lookup(modes[0]).Value.String()
	if modes[0] == "to-earliest" || modes[0] == "to-latest" {
		value = ""
	}
	m, err := offsetreset.ParseMode(modes[0], value, now)
	if err != nil {
		return m, usagef("--%s %q: %v", modes[0], value, err)
	}
	return m, nil
}

// requireInactive refuses to reset a group that has live members.
func requireInactive(env groupsEnv, group string) error {
	described, err := env.adm.DescribeGroups(env.ctx, group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	g, ok := described[group]
	if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) {
		return nil // no group yet: the reset creates its offsets
	}
	if g.Err != nil {
		return fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	return offsetreset.CheckResettable(group, len(g.Members), g.State)
}

// topicPartition is one partition to reset.
type topicPartition struct {
	topic     string
	partition int32
}

// resetPartitions expands --topic and --all-topics into partitions.
func resetPartitions(env groupsEnv, specs []string, all bool, committed kadm.OffsetResponses) ([]topicPartition, error) {
	var out []topicPartition
	add := func(tp topicPartition) {
		if !slices.Contains(out, tp) {
			out = append(out, tp)
		}
	}
	if all {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil {
				add(topicPartition{o.Topic, o.Partition})
			}
		})
	}
	for _, spec := range specs {
		topic, list, hasList := strings.Cut(spec, ":")
		if topic == "" {
			return nil, usagef("--topic %q: no topic name", spec)
		}
		details, err := env.adm.ListTopics(env.ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("describe topic %s: %w", topic, err)
		}
		d, ok := details[topic]
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", topic, cmp.Or(d.Err, error(kerr.UnknownTopicOrPartition)))
		}
		if !hasList {
			for p := range d.Partitions {
				add(topicPartition{topic, p})
			}
			continue
		}
		for _, s := range strings.Split(list, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return nil, usagef("--topic %q: %q is not a partition number", spec, s)
			}
			if _, ok := d.Partitions[int32(p)]; !ok {
				return nil, fmt.Errorf("topic %s has no partition %d", topic, p)
			}
			add(topicPartition{topic, int32(p)})
		}
	}
	slices.SortFunc(out, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return out, nil
}

// planReset looks up the offsets of every partition and computes its new
// committed offset.
func planReset(env groupsEnv, mode offsetreset.Mode, parts []topicPartition, committed kadm.OffsetResponses) ([]offsetreset.Step, error) {
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	starts, err := env.adm.ListStartOffsets(env.ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := env.adm.ListEndOffsets(env.ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if ts := mode.Timestamp(); ts >= 0 {
		if atTime, err = env.adm.ListOffsetsAfterMilli(env.ctx, ts, topics...); err != nil {
			return nil, fmt.Errorf("list offsets after %s: %w", time.UnixMilli(ts).Format(time.RFC3339Nano), err)
		}
	}
	offsets := make([]offsetreset.Partition, 0, len(parts))
	for _, tp := range parts {
		p := offsetreset.Partition{Topic: tp.topic, Partition: tp.partition, Committed: -1, AtTime: -1}
		if o, ok := committed.Lookup(tp.topic, tp.partition); ok && o.Err == nil {
			p.Committed = o.At
		}
		start, sok := starts.Lookup(tp.topic, tp.partition)
		end, eok := ends.Lookup(tp.topic, tp.partition)
		switch {
		case !sok || !eok:
			p.Err = errors.New("no offsets listed for the partition")
		case start.Err != nil || end.Err != nil:
			p.Err = cmp.Or(start.Err, end.Err)
		default:
			p.Start, p.End = start.Offset, end.Offset
		}
		if a, ok := atTime.Lookup(tp.topic, tp.partition); ok && a.Err == nil && a.Offset >= 0 {
			p.AtTime = a.Offset
		}
		offsets = append(offsets, p)
	}
	return offsetreset.Plan(mode, offsets), nil
}

func printResetPlan(env groupsEnv, group string, plan []offsetreset.Step) error {
	tw := newTable(env.out, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
	for _, s := range plan {
		current := "-"
		if s.Current >= 0 {
			current = fmt.Sprint(s.Current)
		}
		next := fmt.Sprint(s.Next)
		if s.Err != nil {
			next = "error: " + s.Err.Error()
		}
		tw.row(group, s.Topic, s.Partition, current, next)
	}
	return tw.flush()
}

// applyReset commits the plan as an admin commit (no member, generation
// -1), which the broker accepts only while the group is empty.
func applyReset(env groupsEnv, group string, plan []offsetreset.Step) error {
	offsets := kadm.Offsets{}
	for _, s := range plan {
		if s.Err != nil {
			return fmt.Errorf("nothing committed: %s[%d]: %v", s.Topic, s.Partition, s.Err)
		}
		offsets.Add(kadm.Offset{Topic: s.Topic, Partition: s.Partition, At: s.Next, LeaderEpoch: -1})
	}
	resps, err := env.adm.CommitOffsets(env.ctx, group, offsets)
	if err != nil {
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	if err := resps.Error(); err != nil {
		if errors.Is(err, kerr.UnknownMemberID) {
			return fmt.Errorf("commit offsets of %s: the group has live members again: %w", group, err)
		}
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	fmt.Fprintf(env.out, "\nCommitted new offsets for %d partition(s) of group %s.\n", len(plan), group)
	return nil
}
