package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicsCommand is one `wharf topics NAME` subcommand.
type topicsCommand struct {
	name, usage, summary string
	// define registers the subcommand's own flags; the returned run is
	// called with the positional arguments after parsing.
	define func(fs *flag.FlagSet) func(ctx context.Context, adm *kadm.Client, args []string, out io.Writer) error
}

func topicsCommands() []topicsCommand {
	return []topicsCommand{
		{"create", "NAME [--partitions N] [--config k=v ...]", "create a topic", defineTopicsCreate},
		{"list", "", "list topics", defineTopicsList},
		{"describe", "NAME", "show a topic's partitions (start offset, high watermark) and configs", defineTopicsDescribe},
		{"alter", "NAME [--config k=v ...] [--delete-config k ...] [--partitions N]", "change a topic's configs or grow its partitions", defineTopicsAlter},
		{"delete", "NAME", "delete a topic and its data", defineTopicsDelete},
	}
}

func runTopics(ctx context.Context, args []string, std stdio) error {
	cmds := topicsCommands()
	help := make([]subcommandHelp, len(cmds))
	for i, c := range cmds {
		help[i] = subcommandHelp{c.name, c.summary}
	}
	i, err := selectSubcommand("topics", help, args, std)
	if i < 0 {
		return err
	}
	return runTopicsCommand(ctx, cmds[i], args[1:], std)
}

func runTopicsCommand(ctx context.Context, c topicsCommand, args []string, std stdio) error {
	var run func(context.Context, *kadm.Client, []string, io.Writer) error
	return runKafkaSubcommand(ctx, "topics", c.name, c.usage, c.summary, args, std,
		func(fs *flag.FlagSet) { run = c.define(fs) },
		func(ctx context.Context, cl *kgo.Client, _ string, positional []string) error {
			return run(ctx, kadm.NewClient(cl), positional, std.out)
		})
}

func defineTopicsCreate(fs *flag.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	partitions := fs.Int("partitions", -1, "number of partitions (-1: the broker's --num-partitions)")
	var configs stringList
	fs.Var(&configs, "config", "topic config key=value (repeatable)")
	return func(ctx context.Context, adm *kadm.Client, args []string, out io.Writer) error {
		if err := expectArgs(args, 1, "topic name"); err != nil {
			return err
		}
		cfg, err := parseConfigs(configs)
		if err != nil {
			return err
		}
		// Replication factor -1: the broker's default (one copy on a single node).
		resp, err := adm.CreateTopic(ctx, int32(*partitions), -1, cfg, args[0])
		if resp.Topic == "" {
			if err == nil {
				err = errors.New("empty response")
			}
			return fmt.Errorf("create topic %s: %w", args[0], err)
		}
		return printStatusTable(out, []topicStatus{{args[0], resp.Err, resp.ErrMessage}})
	}
}

func defineTopicsList(fs *flag.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	return func(ctx context.Context, adm *kadm.Client, args []string, out io.Writer) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
		tw := newTable(out, "NAME", "PARTITIONS", "REPLICAS")
		for _, t := range topics.Sorted() {
			if t.Err != nil {
				tw.row(t.Topic, "-", "-", t.Err.Error())
				continue
			}
			tw.row(t.Topic, len(t.Partitions), t.Partitions.NumReplicas())
		}
		return tw.flush()
	}
}

func defineTopicsDescribe(fs *flag.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	return func(ctx context.Context, adm *kadm.Client, args []string, out io.Writer) error {
		if err := expectArgs(args, 1, "topic name"); err != nil {
			return err
		}
		name := args[0]
		topics, err := adm.ListTopics(ctx, name)
		if err != nil {
			return fmt.Errorf("describe %s: %w", name, err)
		}
		detail, ok := topics[name]
		if !ok {
			return fmt.Errorf("describe %s: %w", name, kerr.UnknownTopicOrPartition)
		}
		if detail.Err != nil {
			return fmt.Errorf("describe %s: %w", name, detail.Err)
		}
		configs, err := adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			return fmt.Errorf("describe configs of %s: %w", name, err)
		}
		starts, err := adm.ListStartOffsets(ctx, name)
		if err != nil {
			return fmt.Errorf("list start offsets of %s: %w", name, err)
		}
		ends, err := adm.ListEndOffsets(ctx, name)
		if err != nil {
			return fmt.Errorf("list end offsets of %s: %w", name, err)
		}
		return printTopicDescription(out, detail, configs, starts, ends)
	}
}

func printTopicDescription(out io.Writer, detail kadm.TopicDetail, configs kadm.ResourceConfigs, starts, ends kadm.ListedOffsets) error {
	section(out, "SUMMARY")
	summary := newTable(out)
	summary.row("NAME", detail.Topic)
	summary.row("PARTITIONS", len(detail.Partitions))
	summary.row("REPLICAS", detail.Partitions.NumReplicas())
	if err := summary.flush(); err != nil {
		return err
	}

	fmt.Fprintln(out)
	section(out, "CONFIGS")
	cfgTable := newTable(out, "KEY", "VALUE", "SOURCE")
	rc, err := configs.On(detail.Topic, nil)
	switch {
	case err != nil:
		cfgTable.row("-", "-", err.Error())
	case rc.Err != nil:
		cfgTable.row("-", "-", rc.Err.Error())
	default:
		sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
		for _, c := range rc.Configs {
			value := c.MaybeValue()
			if c.Sensitive {
				value = "(sensitive)"
			}
			cfgTable.row(c.Key, value, c.Source)
		}
	}
	if err := cfgTable.flush(); err != nil {
		return err
	}

	fmt.Fprintln(out)
	section(out, "PARTITIONS")
	parts := newTable(out, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "LOG-START-OFFSET", "HIGH-WATERMARK")
	for _, p := range detail.Partitions.Sorted() {
		parts.row(p.Partition, p.Leader, p.LeaderEpoch, fmt.Sprint(p.Replicas),
			offsetCell(starts, p.Topic, p.Partition), offsetCell(ends, p.Topic, p.Partition))
	}
	return parts.flush()
}

// offsetCell is a partition's listed offset, or its error.
func offsetCell(offsets kadm.ListedOffsets, topic string, partition int32) string {
	o, ok := offsets.Lookup(topic, partition)
	switch {
	case !ok:
		return "-"
	case o.Err != nil:
		return o.Err.Error()
	}
	return fmt.Sprint(o.Offset)
}

func defineTopicsAlter(fs *flag.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	var set, del stringList
	fs.Var(&set, "config", "set topic config key=value (repeatable)")
	fs.Var(&del, "delete-config", "remove a topic config override, back to the default (repeatable)")
	partitions := fs.Int("partitions", 0, "grow the topic to this many partitions in total")
	return func(ctx context.Context, adm *kadm.Client, args []string, out io.Writer) error {
		if err := expectArgs(args, 1, "topic name"); err != nil {
			return err
		}
		name := args[0]
		if len(set) == 0 && len(del) == 0 && *partitions == 0 {
			return usagef("nothing to alter: give --config, --delete-config or --partitions")
		}
		setConfigs, err := parseConfigs(set)
		if err != nil {
			return err
		}
		var status []topicStatus
		if len(setConfigs) > 0 || len(del) > 0 {
			var alters []kadm.AlterConfig
			for _, k := range sortedKeys(setConfigs) {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: setConfigs[k]})
			}
			for _, k := range del {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			resps, err := adm.AlterTopicConfigs(ctx, alters, name)
			if err != nil {
				return fmt.Errorf("alter configs of %s: %w", name, err)
			}
			r, err := resps.On(name, nil)
			if err != nil {
				return fmt.Errorf("alter configs of %s: %w", name, err)
			}
			status = append(status, topicStatus{name + " (configs)", r.Err, r.ErrMessage})
		}
		if *partitions != 0 {
			resps, err := adm.UpdatePartitions(ctx, *partitions, name)
			if err != nil {
				return fmt.Errorf("set partitions of %s: %w", name, err)
			}
			r, err := resps.On(name, nil)
			if err != nil {
				return fmt.Errorf("set partitions of %s: %w", name, err)
			}
			status = append(status, topicStatus{name + " (partitions)", r.Err, r.ErrMessage})
		}
		return printStatusTable(out, status)
	}
}

func defineTopicsDelete(fs *flag.FlagSet) func(context.Context, *kadm.Client, []string, io.Writer) error {
	return func(ctx context.Context, adm *kadm.Client, args []string, out io.Writer) error {
		if err := expectArgs(args, 1, "topic name"); err != nil {
			return err
		}
		resp, err := adm.DeleteTopic(ctx, args[0])
		if resp.Topic == "" && err != nil {
			return fmt.Errorf("delete topic %s: %w", args[0], err)
		}
		return printStatusTable(out, []topicStatus{{args[0], resp.Err, resp.ErrMessage}})
	}
}

// topicStatus is one row of the TOPIC/STATUS table that create, alter and
// delete print.
type topicStatus struct {
	topic string
	err   error
	msg   string
}

// printStatusTable prints one row per topic and returns an error (exit
// status 1) if any row failed; the table already says which and why.
func printStatusTable(out io.Writer, rows []topicStatus) error {
	tw := newTable(out, "TOPIC", "STATUS")
	failed := 0
	for _, r := range rows {
		status := "OK"
		if r.err != nil {
			failed++
			status = errorStatus(r.err, r.msg)
		}
		tw.row(r.topic, status)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d operations failed (see the STATUS column)", failed, len(rows))
	}
	return nil
}

// errorStatus is a Kafka error's code name with the broker's own message
// when it sent one ("INVALID_CONFIG: unknown topic config ..."), else the
// code's generic description.
func errorStatus(err error, brokerMsg string) string {
	var kafkaErr *kerr.Error
	if brokerMsg != "" && errors.As(err, &kafkaErr) {
		return kafkaErr.Message + ": " + brokerMsg
	}
	if brokerMsg != "" {
		return err.Error() + ": " + brokerMsg
	}
	return err.Error()
}

func sortedKeys(m map[string]*string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// table writes aligned columns, as rpk prints them.
type table struct{ tw *tabwriter.Writer }

func newTable(out io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		cells := make([]any, len(header))
		for i, h := range header {
			cells[i] = h
		}
		t.row(cells...)
	}
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprint(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

func section(out io.Writer, title string) {
	fmt.Fprintf(out, "%s\n%s\n", title, strings.Repeat("=", len(title)))
}
