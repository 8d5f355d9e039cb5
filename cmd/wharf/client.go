package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// adminTimeout bounds one admin command (`wharf topics ...`), including
// connecting to an unreachable broker.
const adminTimeout = 15 * time.Second

// addBootstrapFlag adds --bootstrap-server (env WHARF_BOOTSTRAP_SERVER) to a
// client subcommand and returns the value and its env binding.
func addBootstrapFlag(fs *flag.FlagSet) (*string, []string) {
	addr := fs.String("bootstrap-server", "localhost:9092", "comma-separated Kafka addresses of the broker")
	return addr, bindEnv(fs, "bootstrap-server")
}

// newKafkaClient makes a franz-go client for the brokers in bootstrap.
func newKafkaClient(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, usagef("--bootstrap-server is empty")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// runKafkaSubcommand runs `wharf group name` for a command that talks to the
// broker: define registers the command's own flags beside
// --bootstrap-server, and run gets a connected client, the broker address,
// the positional arguments and a context bounded by adminTimeout.
func runKafkaSubcommand(ctx context.Context, group, name, usage, summary string, args []string, std stdio,
	define func(fs *flag.FlagSet), run func(ctx context.Context, cl *kgo.Client, bootstrap string, positional []string) error) error {
	fs := newFlagSet(group+" "+name, usage, strings.ToUpper(summary[:1])+summary[1:]+".", std.err)
	bootstrap, env := addBootstrapFlag(fs)
	define(fs)
	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	cl, err := newKafkaClient(*bootstrap)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return run(ctx, cl, *bootstrap, positional)
}
