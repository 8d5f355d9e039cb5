package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
	output := addOutputFlag(fs)
	return func(env groupsEnv, args []string) error {
		if err := expectArgs(args, 1, "group name"); err != nil {
			return err
		}
		if err := env.reachable(); err != nil {
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
		d := describeGroupLag(g, rows, ends, nextRecordTimes(env, rows, ends), env.now())
		if *output == outputJSON {
			return writeJSON(env.out, d)
		}
		return printGroupDescription(env.out, d)
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

// groupDescription is what `groups describe` prints, and its JSON.
type groupDescription struct {
	Group    string `json:"group"`
	State    string `json:"state"`
	Protocol string `json:"protocol"`
	Members  int    `json:"members"`
	// Lags has a line per partition the group committed or is assigned,
	// and one per member without partitions (no topic).
	Lags []partitionLag `json:"partitions"`
}

// partitionLag is one line of describe. A nil number is unknown.
type partitionLag struct {
	Topic         string `json:"topic,omitempty"`
	Partition     *int32 `json:"partition,omitempty"`
	CurrentOffset *int64 `json:"current_offset"`
	LogEndOffset  *int64 `json:"log_end_offset"`
	Lag           *int64 `json:"lag"`
	// LagMillis is the age of the next record the group will consume
	// (0 when it has consumed everything).
	LagMillis *int64 `json:"lag_ms"`
	MemberID  string `json:"member_id,omitempty"`
	Host      string `json:"host,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
}

func describeGroupLag(g kadm.DescribedGroup, rows []lagRow, ends kadm.ListedOffsets, next map[string]map[int32]time.Time, now time.Time) groupDescription {
	d := groupDescription{Group: g.Group, State: g.State, Protocol: g.Protocol, Members: len(g.Members), Lags: []partitionLag{}}
	for _, r := range rows {
		var l partitionLag
		if r.member != nil {
			l.MemberID, l.Host, l.ClientID = r.member.MemberID, r.member.ClientHost, r.member.ClientID
		}
		if r.topic == "" {
			d.Lags = append(d.Lags, l)
			continue
		}
		l.Topic, l.Partition = r.topic, &r.partition
		if r.committed >= 0 {
			l.CurrentOffset = &r.committed
		}
		if e, ok := ends.Lookup(r.topic, r.partition); ok && e.Err == nil {
			l.LogEndOffset = &e.Offset
			if r.committed >= 0 {
				lag := max(0, e.Offset-r.committed)
				l.Lag = &lag
				if ts, ok := next[r.topic][r.partition]; ok {
					ms := max(0, now.Sub(ts).Milliseconds())
					l.LagMillis = &ms
				} else if lag == 0 {
					l.LagMillis = new(int64)
				}
			}
		}
		d.Lags = append(d.Lags, l)
	}
	return d
}

func printGroupDescription(out io.Writer, d groupDescription) error {
	fmt.Fprintf(out, "Group %s: state %s, protocol %s, %d member(s)\n\n", d.Group, orDash(d.State), orDash(d.Protocol), d.Members)
	tw := newTable(out, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAG-TIME", "MEMBER-ID", "HOST", "CLIENT-ID")
	for _, l := range d.Lags {
		partition, lagTime := "-", "-"
		if l.Partition != nil {
			partition = fmt.Sprint(*l.Partition)
		}
		if l.LagMillis != nil {
			lagTime = (time.Duration(*l.LagMillis) * time.Millisecond).String()
		}
		tw.row(d.Group, orDash(l.Topic), partition, numberCell(l.CurrentOffset), numberCell(l.LogEndOffset), numberCell(l.Lag),
			lagTime, orDash(l.MemberID), orDash(l.Host), orDash(l.ClientID))
	}
	return tw.flush()
}

func numberCell(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}
