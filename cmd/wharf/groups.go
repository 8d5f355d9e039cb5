package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupsCommand is one `wharf groups NAME` subcommand, as Kafka users know
// them from kafka-consumer-groups.sh.
type groupsCommand struct {
	name, usage, summary string
	// define registers the subcommand's flags; the returned run is called
	// with the positional arguments after parsing.
	define func(fs *flag.FlagSet) func(env groupsEnv, args []string) error
}

// groupsEnv is what a groups subcommand works with.
type groupsEnv struct {
	kafkaEnv
	// newClient makes another client of the same brokers (describe reads
	// records with one to measure lag in time).
	newClient func(opts ...kgo.Opt) (*kgo.Client, error)
	now       func() time.Time
}

func groupsCommands() []groupsCommand {
	return []groupsCommand{
		{"list", "[--state STATE ...] [--output json]", "list consumer groups", defineGroupsList},
		{"describe", "GROUP [--output json]", "show a group's members and, per partition, its committed offset, log end offset, lag and lag in time", defineGroupsDescribe},
		{"reset-offsets", "GROUP (--topic T[:P,P...] ... | --all-topics) MODE [--execute]",
			"plan (or, with --execute, apply) new committed offsets for a group with no live members", defineGroupsResetOffsets},
		{"delete", "GROUP [GROUP ...]", "delete empty groups and their committed offsets", defineGroupsDelete},
	}
}

func runGroups(ctx context.Context, args []string, std stdio) error {
	cmds := groupsCommands()
	help := make([]subcommandHelp, len(cmds))
	for i, c := range cmds {
		help[i] = subcommandHelp{c.name, c.summary}
	}
	i, err := selectSubcommand("groups", help, args, std)
	if i < 0 {
		return err
	}
	return runGroupsCommand(ctx, cmds[i], args[1:], std)
}

func runGroupsCommand(ctx context.Context, c groupsCommand, args []string, std stdio) error {
	var run func(groupsEnv, []string) error
	return runKafkaSubcommand(ctx, "groups", c.name, c.usage, c.summary, args, std,
		func(fs *flag.FlagSet) { run = c.define(fs) },
		func(env kafkaEnv, positional []string) error {
			return run(groupsEnv{
				kafkaEnv:  env,
				newClient: func(opts ...kgo.Opt) (*kgo.Client, error) { return newKafkaClient(env.seeds, opts...) },
				now:       time.Now,
			}, positional)
		})
}

// groupStates are the states a group can be in, as ListGroups filters
// them (Kafka's ConsumerGroupState and KIP-848's).
var groupStates = []string{"Unknown", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"}

// groupListEntry is one group of `groups list --output json`.
type groupListEntry struct {
	Group        string `json:"group"`
	Type         string `json:"type"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

func defineGroupsList(fs *flag.FlagSet) func(groupsEnv, []string) error {
	var states stringList
	fs.Var(&states, "state", "only groups in this `state`, any case: "+strings.Join(groupStates, ", ")+" (repeatable)")
	output := addOutputFlag(fs)
	return func(env groupsEnv, args []string) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		filter, err := canonicalStates(states)
		if err != nil {
			return err
		}
		if err := env.reachable(); err != nil {
			return err
		}
		groups, err := env.adm.ListGroups(env.ctx, filter...)
		if err != nil {
			return fmt.Errorf("list groups: %w", err)
		}
		entries := []groupListEntry{}
		for _, g := range groups.Sorted() {
			entries = append(entries, groupListEntry{g.Group, g.GroupType, g.State, g.ProtocolType})
		}
		if *output == outputJSON {
			return writeJSON(env.out, entries)
		}
		tw := newTable(env.out, "GROUP", "TYPE", "STATE", "PROTOCOL-TYPE")
		for _, g := range entries {
			tw.row(g.Group, orDash(g.Type), orDash(g.State), orDash(g.ProtocolType))
		}
		return tw.flush()
	}
}

// canonicalStates spells each --state as the broker does, as
// kafka-consumer-groups.sh accepts any case, and refuses a state that
// does not exist (the broker would silently match no group).
func canonicalStates(states []string) ([]string, error) {
	out := make([]string, len(states))
	for i, s := range states {
		j := slices.IndexFunc(groupStates, func(known string) bool { return strings.EqualFold(known, s) })
		if j < 0 {
			return nil, usagef("--state %q: want one of %s", s, strings.Join(groupStates, ", "))
		}
		out[i] = groupStates[j]
	}
	return out, nil
}

func defineGroupsDelete(fs *flag.FlagSet) func(groupsEnv, []string) error {
	return func(env groupsEnv, args []string) error {
		if len(args) == 0 {
			return usagef("missing group name")
		}
		if err := env.reachable(); err != nil {
			return err
		}
		resps, err := env.adm.DeleteGroups(env.ctx, args...)
		if err != nil {
			return fmt.Errorf("delete groups: %w", err)
		}
		tw := newTable(env.out, "GROUP", "STATUS")
		failed := 0
		for _, g := range args {
			status := "OK"
			r, ok := resps[g]
			switch {
			case !ok:
				status, failed = "no answer", failed+1
			case r.Err != nil:
				status, failed = errorStatus(r.Err, r.ErrMessage), failed+1
			}
			tw.row(g, status)
		}
		if err := tw.flush(); err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d groups not deleted (see the STATUS column)", failed, len(args))
		}
		return nil
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
