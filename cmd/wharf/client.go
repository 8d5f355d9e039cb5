package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminTimeout bounds one admin command (`wharf topics ...`), including
// connecting to an unreachable broker.
const adminTimeout = 15 * time.Second

// splitSeeds splits --bootstrap-server into host:port addresses; a seed
// without a port gets Kafka's, as franz-go gives it.
func splitSeeds(bootstrap string) ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, kafkaService.port)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, usagef("--bootstrap-server is empty")
	}
	return seeds, nil
}

// connectKafka checks that a seed broker answers as a Kafka broker, so
// that a wrong or dead address fails at once with a line that says what
// is wrong (where a client would retry quietly), and then makes a
// franz-go client of the seeds.
func connectKafka(ctx context.Context, seeds kafkaSeeds, opts ...kgo.Opt) (*kgo.Client, error) {
	if err := checkKafkaSeeds(ctx, seeds); err != nil {
		return nil, err
	}
	return newKafkaClient(seeds, opts...)
}

// newKafkaClient makes a franz-go client of seeds.
func newKafkaClient(seeds kafkaSeeds, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(seeds.options(), opts...)...)
}

// kafkaEnv is what an admin command (`wharf topics ...`, `wharf groups
// ...`) works with.
type kafkaEnv struct {
	ctx   context.Context // bounded by adminTimeout
	adm   *kadm.Client    // connects on its first request
	cl    *kgo.Client     // adm's client, for requests kadm does not shape
	seeds kafkaSeeds
	out   io.Writer
	// reachable checks that a seed answers as a Kafka broker, as
	// connectKafka does. A command calls it once it has checked its
	// arguments, before its first request: a usage error needs no broker.
	reachable func() error
}

// runKafkaSubcommand runs `wharf group name` for a command that talks to the
// broker: define registers the command's own flags beside
// --bootstrap-server, and run gets the command's kafkaEnv and positional
// arguments.
func runKafkaSubcommand(ctx context.Context, group, name, usage, summary string, args []string, std stdio,
	define func(fs *flag.FlagSet), run func(env kafkaEnv, positional []string) error) error {
	fs := newFlagSet(group+" "+name, usage, strings.ToUpper(summary[:1])+summary[1:]+".", std.out)
	bootstrap, envFlags := addBootstrapFlag(fs)
	define(fs)
	positional, err := parseArgs(fs, args, envFlags)
	if err != nil {
		return err
	}
	seeds, err := seedAddrs(*bootstrap)
	if err != nil {
		return err
	}
	cl, err := newKafkaClient(seeds)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return run(kafkaEnv{
		ctx:       ctx,
		adm:       kadm.NewClient(cl),
		cl:        cl,
		seeds:     seeds,
		out:       std.out,
		reachable: sync.OnceValue(func() error { return checkKafkaSeeds(ctx, seeds) }),
	}, positional)
}

// topicPartitions asks the broker how many partitions topic has. With
// create, a broker that auto-creates topics creates a missing one, as it
// would for the first record produced to it.
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string, create bool) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	req.AllowAutoTopicCreation = create
	var resp *kmsg.MetadataResponse
	// A topic the request creates comes back LEADER_NOT_AVAILABLE, as from
	// Kafka, until its partitions have leaders: ask again shortly.
	for retry := time.Duration(0); ; retry = min(2*retry+10*time.Millisecond, time.Second) {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("metadata of %s: %w", topic, ctx.Err())
		case <-time.After(retry):
		}
		var err error
		if resp, err = req.RequestWith(ctx, cl); err != nil {
			return 0, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		if len(resp.Topics) != 1 {
			return 0, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
		}
		if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code {
			break
		}
	}
	switch err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); {
	case errors.Is(err, kerr.UnknownTopicOrPartition) && create:
		return 0, fmt.Errorf("topic %s does not exist, and the broker does not create topics on first use (wharf serve --auto-create-topics=false)", topic)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return 0, fmt.Errorf("topic %s does not exist", topic)
	case err != nil:
		return 0, fmt.Errorf("topic %s: %w", topic, err)
	}
	return int32(len(resp.Topics[0].Partitions)), nil
}

// noPartitionError says that topic, with n partitions, has no partition p.
func noPartitionError(topic string, n, p int32) error {
	return fmt.Errorf("topic %s has no partition %d: its %d partition(s) are numbered from 0", topic, p, n)
}
