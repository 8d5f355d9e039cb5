package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lagTimeWait bounds how long describe reads to find the timestamps of the
// next records the group will consume.
const lagTimeWait = 5 * time.Second

func defineGroupsDescribe(fs *flag.FlagSet) func(groupsEnv, []string) error {
	return func(env groupsEnv, args []string) error {
		if err := expectArgs(args, 1, "group name"); err != nil {
			return err
		}
		name := args[0]
		described, err := env.adm.DescribeGroups(env.ctx, name)
		if err != nil {
			return fmt.Errorf("describe group %s: %w", name, err)
		}
		g, ok := described[name]
		switch {
		case !ok:
			return fmt.Errorf("describe group %s: no answer", name)
		case errors.Is(g.Err, kerr.GroupIDNotFound):
			return fmt.Errorf("group %s does not exist", name)
		case g.Err != nil:
			return fmt.Errorf("describe group %s: %w", name, g.Err)
		}
		committed, err := env.adm.FetchOffsets(env.ctx, name)
		if err != nil {
			return fmt.Errorf("fetch offsets of %s: %w", name, err)
		}
		rows := lagRows(g, committed)
		ends, err := env.adm.ListEndOffsets(env.ctx, rowTopics(rows)...)
		if err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		nextTimes := nextRecordTimes(env, rows, ends)
		return printGroupDescription(env, g, rows, ends, nextTimes)
	}
}

// lagRow is one line of describe: a partition the group has committed or
// a member is assigned, or a member with no partitions.
type lagRow struct {
	topic     string // "" for a member without partitions
	partition int32
	committed int64 // -1: none
	member    *kadm.DescribedGroupMember
}

// lagRows joins the committed offsets with the members' assignments.
func lagRows(g kadm.DescribedGroup, committed kadm.OffsetResponses) []lagRow {
	type tp struct {
		topic string
		p     int32
	}
	rows := map[tp]*lagRow{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			rows[tp{o.Topic, o.Partition}] = &lagRow{topic: o.Topic, partition: o.Partition, committed: o.At}
		}
	})
	var out []lagRow
	for i := range g.Members {
		m := &g.Members[i]
		assigned, ok := m.Assigned.AsConsumer()
		n := 0
		if ok {
			for _, t := range assigned.Topics {
				for _, p := range t.Partitions {
					r := rows[tp{t.Topic, p}]
					if r == nil {
						r = &lagRow{topic: t.Topic, partition: p, committed: -1}
						rows[tp{t.Topic, p}] = r
					}
					r.member = m
					n++
				}
			}
		}
		if n == 0 {
			out = append(out, lagRow{member: m, committed: -1})
		}
	}
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b lagRow) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return out
}

func rowTopics(rows []lagRow) []string {
	var topics []string
	for _, r := range rows {
		if r.topic != "" && !slices.Contains(topics, r.topic) {
			topics = append(topics, r.topic)
		}
	}
	return topics
}

// nextRecordTimes reads, for every partition the group lags on, the record
// at its committed offset (or the first after it, if that one is gone) and
// returns its timestamp: how old the next unconsumed record is.
func nextRecordTimes(env groupsEnv, rows []lagRow, ends kadm.ListedOffsets) map[string]map[int32]time.Time {
	want := map[string]map[int32]kgo.Offset{}
	count := 0
	for _, r := range rows {
		end, ok := ends.Lookup(r.topic, r.partition)
		if r.committed < 0 || !ok || end.Err != nil || end.Offset <= r.committed {
			continue
		}
		if want[r.topic] == nil {
			want[r.topic] = map[int32]kgo.Offset{}
		}
		want[r.topic][r.partition] = kgo.NewOffset().At(r.committed)
		count++
	}
	out := map[string]map[int32]time.Time{}
	if count == 0 {
		return out
	}
	cl, err := env.newClient(kgo.ConsumePartitions(want), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return out
	}
	defer cl.Close()
	deadline := time.Now().Add(lagTimeWait)
	for found := 0; found < count && time.Now().Before(deadline); {
		ctx, cancel := context.WithDeadline(env.ctx, deadline)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			if out[r.Topic] == nil {
				out[r.Topic] = map[int32]time.Time{}
			}
			if _, seen := out[r.Topic][r.Partition]; !seen {
				out[r.Topic][r.Partition] = r.Timestamp
				found++
				cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			}
		})
	}
	return out
}

func printGroupDescription(env groupsEnv, g kadm.DescribedGroup, rows []lagRow, ends kadm.ListedOffsets, next map[string]map[int32]time.Time) error {
	fmt.Fprintf(env.out, "Group %s: state %s, protocol %s, %d member(s)\n\n", g.Group, orDash(g.State), orDash(g.Protocol), len(g.Members))
	tw := newTable(env.out, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAG-TIME", "MEMBER-ID", "HOST", "CLIENT-ID")
	now := env.now()
	for _, r := range rows {
		member, host, client := "-", "-", "-"
		if r.member != nil {
			member, host, client = r.member.MemberID, r.member.ClientHost, r.member.ClientID
		}
		if r.topic == "" {
			tw.row(g.Group, "-", "-", "-", "-", "-", "-", member, host, client)
			continue
		}
		current, end, lag, lagTime := "-", "-", "-", "-"
		if r.committed >= 0 {
			current = fmt.Sprint(r.committed)
		}
		if e, ok := ends.Lookup(r.topic, r.partition); ok && e.Err == nil {
			end = fmt.Sprint(e.Offset)
			if r.committed >= 0 {
				lag = fmt.Sprint(max(0, e.Offset-r.committed))
				if ts, ok := next[r.topic][r.partition]; ok {
					lagTime = max(0, now.Sub(ts)).Round(time.Millisecond).String()
				} else if e.Offset <= r.committed {
					lagTime = "0s"
				}
			}
		}
		tw.row(g.Group, r.topic, r.partition, current, end, lag, lagTime, member, host, client)
	}
	return tw.flush()
}
