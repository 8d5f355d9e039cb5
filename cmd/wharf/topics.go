package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicsCommand is one `wharf topics NAME` subcommand.
type topicsCommand struct {
	name, usage, summary string
	// define registers the subcommand's own flags; the returned run is
	// called with the topic names (positional arguments and --topic)
	// after parsing.
	define func(fs *flag.FlagSet) func(env kafkaEnv, topics []string) error
}

func topicsCommands() []topicsCommand {
	return []topicsCommand{
		{"create", "NAME [--partitions N] [--replication-factor 1] [--config k=v ...]", "create a topic", defineTopicsCreate},
		{"list", "[--output json]", "list topics", defineTopicsList},
		{"describe", "[NAME ...] [--output json]", "show topics' partitions (start offset, high watermark) and configs; every topic without a NAME", defineTopicsDescribe},
		{"alter", "NAME [--config k=v ...] [--delete-config k ...] [--partitions N]", "change a topic's configs or grow its partitions", defineTopicsAlter},
		{"delete", "NAME [NAME ...]", "delete topics and their data", defineTopicsDelete},
		{"reassign", "NAME --partition P --replicas ID,ID,...", "move a partition to other nodes (in a cluster)", defineTopicsReassign},
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
	var (
		run        func(kafkaEnv, []string) error
		topicFlags stringList
	)
	return runKafkaSubcommand(ctx, "topics", c.name, c.usage, c.summary, args, std,
		func(fs *flag.FlagSet) {
			if c.name != "list" {
				fs.Var(&topicFlags, "topic", "a topic `name`, as kafka-topics.sh takes it (repeatable; the same as a NAME argument)")
			}
			run = c.define(fs)
		},
		func(env kafkaEnv, positional []string) error {
			return run(env, append(positional, topicFlags...))
		})
}

func defineTopicsCreate(fs *flag.FlagSet) func(kafkaEnv, []string) error {
	partitions := fs.Int("partitions", -1, "number of partitions (default: the broker's --num-partitions)")
	replicationFactor := fs.Int("replication-factor", -1, "copies of each partition; a single node holds 1 (default: the broker's)")
	var configs stringList
	fs.Var(&configs, "config", "topic config `key=value` (repeatable)")
	return func(env kafkaEnv, topics []string) error {
		if err := expectArgs(topics, 1, "topic name"); err != nil {
			return err
		}
		if rf := *replicationFactor; rf != -1 && (rf < 1 || rf > math.MaxInt16) {
			return usagef("--replication-factor must be between 1 and %d, got %d", math.MaxInt16, rf)
		}
		cfg, err := parseConfigs(configs)
		if err != nil {
			return err
		}
		if err := env.reachable(); err != nil {
			return err
		}
		// The broker checks the replication factor against its brokers,
		// as Kafka's does (INVALID_REPLICATION_FACTOR).
		resp, err := env.adm.CreateTopic(env.ctx, int32(*partitions), int16(*replicationFactor), cfg, topics[0])
		if resp.Topic == "" {
			if err == nil {
				err = errors.New("empty response")
			}
			return fmt.Errorf("create topic %s: %w", topics[0], err)
		}
		return printStatusTable(env.out, []topicStatus{{topics[0], resp.Err, resp.ErrMessage}})
	}
}

// topicListEntry is one topic of `topics list --output json`.
type topicListEntry struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replicas"`
	Error      string `json:"error,omitempty"`
}

func defineTopicsList(fs *flag.FlagSet) func(kafkaEnv, []string) error {
	output := addOutputFlag(fs)
	return func(env kafkaEnv, args []string) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		if err := env.reachable(); err != nil {
			return err
		}
		topics, err := env.adm.ListTopics(env.ctx)
		if err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
		entries := []topicListEntry{}
		for _, t := range topics.Sorted() {
			e := topicListEntry{Name: t.Topic, Partitions: len(t.Partitions), Replicas: t.Partitions.NumReplicas()}
			if t.Err != nil {
				e.Error = t.Err.Error()
			}
			entries = append(entries, e)
		}
		if *output == outputJSON {
			return writeJSON(env.out, entries)
		}
		tw := newTable(env.out, "NAME", "PARTITIONS", "REPLICAS")
		for _, e := range entries {
			if e.Error != "" {
				tw.row(e.Name, "-", "-", e.Error)
				continue
			}
			tw.row(e.Name, e.Partitions, e.Replicas)
		}
		return tw.flush()
	}
}

func defineTopicsAlter(fs *flag.FlagSet) func(kafkaEnv, []string) error {
	var set, del stringList
	fs.Var(&set, "config", "set topic config `key=value` (repeatable)")
	fs.Var(&del, "delete-config", "remove the override of config `key`, back to the default (repeatable)")
	partitions := fs.Int("partitions", 0, "grow the topic to this many partitions in total")
	return func(env kafkaEnv, topics []string) error {
		if err := expectArgs(topics, 1, "topic name"); err != nil {
			return err
		}
		name := topics[0]
		if len(set) == 0 && len(del) == 0 && *partitions == 0 {
			return usagef("nothing to alter: give --config, --delete-config or --partitions")
		}
		setConfigs, err := parseConfigs(set)
		if err != nil {
			return err
		}
		if err := env.reachable(); err != nil {
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
			resps, err := env.adm.AlterTopicConfigs(env.ctx, alters, name)
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
			resps, err := env.adm.UpdatePartitions(env.ctx, *partitions, name)
			if err != nil {
				return fmt.Errorf("set partitions of %s: %w", name, err)
			}
			r, err := resps.On(name, nil)
			if err != nil {
				return fmt.Errorf("set partitions of %s: %w", name, err)
			}
			status = append(status, topicStatus{name + " (partitions)", r.Err, r.ErrMessage})
		}
		return printStatusTable(env.out, status)
	}
}

func defineTopicsDelete(fs *flag.FlagSet) func(kafkaEnv, []string) error {
	return func(env kafkaEnv, topics []string) error {
		if len(topics) == 0 {
			return usagef("missing topic name")
		}
		if err := env.reachable(); err != nil {
			return err
		}
		resps, err := env.adm.DeleteTopics(env.ctx, topics...)
		if err != nil {
			return fmt.Errorf("delete topics: %w", err)
		}
		status := make([]topicStatus, len(topics))
		for i, t := range topics {
			status[i] = topicStatus{topic: t, err: errors.New("no answer")}
			if r, ok := resps[t]; ok {
				status[i] = topicStatus{t, r.Err, r.ErrMessage}
			}
		}
		return printStatusTable(env.out, status)
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
