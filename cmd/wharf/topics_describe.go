package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicDescription is one topic of `topics describe`, as --output json
// prints it.
type topicDescription struct {
	Name       string                 `json:"name"`
	Partitions []partitionDescription `json:"partitions"`
	Configs    []topicConfig          `json:"configs"`
	// ConfigsError is why the configs could not be read.
	ConfigsError string `json:"configs_error,omitempty"`
}

type partitionDescription struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	// The offsets are null when they could not be listed; Error says why.
	LogStartOffset *int64 `json:"log_start_offset"`
	HighWatermark  *int64 `json:"high_watermark"`
	Error          string `json:"error,omitempty"`
}

type topicConfig struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"` // null when unset or sensitive
	Sensitive bool    `json:"sensitive,omitempty"`
	Source    string  `json:"source"`
}

func defineTopicsDescribe(fs *flag.FlagSet) func(kafkaEnv, []string) error {
	output := addOutputFlag(fs)
	return func(env kafkaEnv, names []string) error {
		if err := env.reachable(); err != nil {
			return err
		}
		topics, err := env.adm.ListTopics(env.ctx, names...)
		if err != nil {
			return fmt.Errorf("describe topics: %w", err)
		}
		for _, name := range names {
			if d, ok := topics[name]; !ok || d.Err != nil {
				return fmt.Errorf("topic %s does not exist (%w)", name, kerr.UnknownTopicOrPartition)
			}
		}
		names = topics.Names()
		descriptions := []topicDescription{}
		if len(names) > 0 {
			if descriptions, err = describeTopics(env.ctx, env.adm, topics, names); err != nil {
				return err
			}
		}
		if *output == outputJSON {
			return writeJSON(env.out, descriptions)
		}
		for i, d := range descriptions {
			if i > 0 {
				fmt.Fprintln(env.out)
			}
			if err := printTopicDescription(env.out, d); err != nil {
				return err
			}
		}
		return nil
	}
}

// describeTopics gathers the configs and the partitions' offsets of the
// named topics, in three requests for all of them.
func describeTopics(ctx context.Context, adm *kadm.Client, topics kadm.TopicDetails, names []string) ([]topicDescription, error) {
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var out []topicDescription
	for _, name := range names {
		d := topicDescription{Name: name, Partitions: []partitionDescription{}, Configs: []topicConfig{}}
		for _, p := range topics[name].Partitions.Sorted() {
			pd := partitionDescription{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas}
			pd.LogStartOffset, pd.Error = listedOffset(starts, name, p.Partition)
			var endErr string
			pd.HighWatermark, endErr = listedOffset(ends, name, p.Partition)
			if pd.Error == "" {
				pd.Error = endErr
			}
			d.Partitions = append(d.Partitions, pd)
		}
		rc, err := configs.On(name, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			d.ConfigsError = err.Error()
		} else {
			sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
			for _, c := range rc.Configs {
				d.Configs = append(d.Configs, topicConfig{Key: c.Key, Value: c.Value, Sensitive: c.Sensitive, Source: c.Source.String()})
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// listedOffset is a partition's listed offset, or why there is none.
func listedOffset(offsets kadm.ListedOffsets, topic string, partition int32) (*int64, string) {
	o, ok := offsets.Lookup(topic, partition)
	switch {
	case !ok:
		return nil, "no offset listed"
	case o.Err != nil:
		return nil, o.Err.Error()
	}
	return &o.Offset, ""
}

func printTopicDescription(out io.Writer, d topicDescription) error {
	replicas := 0
	if len(d.Partitions) > 0 {
		replicas = len(d.Partitions[0].Replicas)
	}
	section(out, "SUMMARY")
	summary := newTable(out)
	summary.row("NAME", d.Name)
	summary.row("PARTITIONS", len(d.Partitions))
	summary.row("REPLICAS", replicas)
	if err := summary.flush(); err != nil {
		return err
	}

	fmt.Fprintln(out)
	section(out, "CONFIGS")
	cfgTable := newTable(out, "KEY", "VALUE", "SOURCE")
	if d.ConfigsError != "" {
		cfgTable.row("-", "-", d.ConfigsError)
	}
	for _, c := range d.Configs {
		value := ""
		switch {
		case c.Sensitive:
			value = "(sensitive)"
		case c.Value != nil:
			value = *c.Value
		}
		cfgTable.row(c.Key, value, c.Source)
	}
	if err := cfgTable.flush(); err != nil {
		return err
	}

	fmt.Fprintln(out)
	section(out, "PARTITIONS")
	parts := newTable(out, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "LOG-START-OFFSET", "HIGH-WATERMARK")
	for _, p := range d.Partitions {
		parts.row(p.Partition, p.Leader, p.LeaderEpoch, fmt.Sprint(p.Replicas),
			offsetCell(p.LogStartOffset, p.Error), offsetCell(p.HighWatermark, p.Error))
	}
	return parts.flush()
}

func offsetCell(offset *int64, err string) string {
	if offset == nil {
		return orDash(err)
	}
	return fmt.Sprint(*offset)
}
