package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// resetMode is how reset-offsets picks the new offset of a partition.
type resetMode struct {
	name string
	// target computes the new offset from the partition's committed
	// offset (-1: none) and its log start and end offsets; at is the
	// first offset at or after the requested time, for the time modes.
	target func(committed, start, end, at int64) (int64, error)
	// timestamp is the time (ms) to look up offsets for, or -1.
	timestamp int64
}

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
func resetModeFromFlags(fs *flag.FlagSet, now time.Time) (resetMode, error) {
	var modes []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime", "by-duration":
			modes = append(modes, f.Name)
		}
	})
	if len(modes) != 1 {
		return resetMode{}, usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, --by-duration (got %d)", len(modes))
	}
	value := fs.Lookup(modes[0]).Value.String()
	m := resetMode{name: modes[0], timestamp: -1}
	switch m.name {
	case "to-earliest":
		m.target = func(_, start, _, _ int64) (int64, error) { return start, nil }
	case "to-latest":
		m.target = func(_, _, end, _ int64) (int64, error) { return end, nil }
	case "to-offset":
		n, _ := strconv.ParseInt(value, 10, 64)
		m.target = func(_, start, end, _ int64) (int64, error) { return min(max(n, start), end), nil }
	case "shift-by":
		n, _ := strconv.ParseInt(value, 10, 64)
		m.target = func(committed, start, end, _ int64) (int64, error) {
			if committed < 0 {
				return 0, errors.New("no committed offset to shift")
			}
			return min(max(committed+n, start), end), nil
		}
	case "to-datetime", "by-duration":
		var at time.Time
		if m.name == "to-datetime" {
			t, err := parseResetDatetime(value)
			if err != nil {
				return m, usagef("--to-datetime %q: %v", value, err)
			}
			at = t
		} else {
			d, err := parseISODuration(value)
			if err != nil {
				return m, usagef("--by-duration %q: %v", value, err)
			}
			at = now.Add(-d)
		}
		m.timestamp = at.UnixMilli()
		m.target = func(_, _, _, at int64) (int64, error) { return at, nil }
	}
	return m, nil
}

// requireInactive refuses to reset a group that has live members: they
// would overwrite the new offsets with their next commit, and the broker
// refuses commits from outside a group that has members anyway.
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
	if len(g.Members) > 0 {
		return fmt.Errorf("group %s has %d live member(s) (state %s): stop its consumers before resetting its offsets", group, len(g.Members), g.State)
	}
	return nil
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

// resetStep is one line of the plan.
type resetStep struct {
	topicPartition
	current, next int64
	err           error
}

// planReset computes the new offset of every partition.
func planReset(env groupsEnv, mode resetMode, parts []topicPartition, committed kadm.OffsetResponses) ([]resetStep, error) {
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
	if mode.timestamp >= 0 {
		if atTime, err = env.adm.ListOffsetsAfterMilli(env.ctx, mode.timestamp, topics...); err != nil {
			return nil, fmt.Errorf("list offsets after %s: %w", time.UnixMilli(mode.timestamp).Format(time.RFC3339Nano), err)
		}
	}
	plan := make([]resetStep, 0, len(parts))
	for _, tp := range parts {
		step := resetStep{topicPartition: tp, current: -1}
		if o, ok := committed.Lookup(tp.topic, tp.partition); ok && o.Err == nil {
			step.current = o.At
		}
		start, sok := starts.Lookup(tp.topic, tp.partition)
		end, eok := ends.Lookup(tp.topic, tp.partition)
		switch {
		case !sok || !eok:
			step.err = errors.New("no offsets listed for the partition")
		case start.Err != nil || end.Err != nil:
			step.err = cmp.Or(start.Err, end.Err)
		default:
			at := int64(-1)
			if mode.timestamp >= 0 {
				if a, ok := atTime.Lookup(tp.topic, tp.partition); ok && a.Err == nil && a.Offset >= 0 {
					at = a.Offset
				} else {
					at = end.Offset // nothing at or after the time
				}
			}
			step.next, step.err = mode.target(step.current, start.Offset, end.Offset, at)
		}
		plan = append(plan, step)
	}
	return plan, nil
}

func printResetPlan(env groupsEnv, group string, plan []resetStep) error {
	tw := newTable(env.out, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
	for _, s := range plan {
		current := "-"
		if s.current >= 0 {
			current = fmt.Sprint(s.current)
		}
		next := fmt.Sprint(s.next)
		if s.err != nil {
			next = "error: " + s.err.Error()
		}
		tw.row(group, s.topic, s.partition, current, next)
	}
	return tw.flush()
}

// applyReset commits the plan as an admin commit (no member, generation
// -1), which the broker accepts only while the group is empty.
func applyReset(env groupsEnv, group string, plan []resetStep) error {
	offsets := kadm.Offsets{}
	for _, s := range plan {
		if s.err != nil {
			return fmt.Errorf("nothing committed: %s[%d]: %v", s.topic, s.partition, s.err)
		}
		offsets.Add(kadm.Offset{Topic: s.topic, Partition: s.partition, At: s.next, LeaderEpoch: -1})
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

// resetDatetimeLayouts are the forms --to-datetime accepts: Kafka's
// YYYY-MM-DDTHH:mm:SS.sss, optionally without the milliseconds, optionally
// followed by a zone.
var resetDatetimeLayouts = []string{
	"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05.000", "2006-01-02T15:04:05",
}

func parseResetDatetime(s string) (time.Time, error) {
	for _, layout := range resetDatetimeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want YYYY-MM-DDTHH:mm:SS.sss, optionally followed by a zone (Z, +01:00)")
}

// isoDuration is the ISO-8601 duration subset Java's Duration.parse reads:
// days, hours, minutes and (fractional) seconds.
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,9})?)S)?)?$`)

func parseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, errors.New("want an ISO-8601 duration such as PT1H, PT30M, P1DT12H or PT0.5S")
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, err := strconv.ParseInt(m[i+1], 10, 64)
			if err != nil {
				return 0, err
			}
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		secs, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return 0, err
		}
		d += time.Duration(secs * float64(time.Second))
	}
	return d, nil
}
