package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

// `wharf cluster status`: the nodes, which one is the controller, and
// every partition's leader, replicas and in-sync replicas, from the
// Kafka API's Metadata (any node answers for the whole cluster).

func runCluster(ctx context.Context, args []string, std stdio) error {
	cmds := []subcommandHelp{{"status", "show the nodes, the controller and each partition's leader and in-sync replicas"}}
	i, err := selectSubcommand("cluster", cmds, args, std)
	if i < 0 {
		return err
	}
	return runKafkaSubcommand(ctx, "cluster", "status", "[flags]", cmds[0].summary, args[1:], std,
		func(*flag.FlagSet) {},
		func(env kafkaEnv, positional []string) error {
			if err := expectArgs(positional, 0, ""); err != nil {
				return err
			}
			if err := env.reachable(); err != nil {
				return err
			}
			md, err := env.adm.Metadata(env.ctx)
			if err != nil {
				return fmt.Errorf("cluster status: %w", err)
			}
			return printClusterStatus(env.out, md)
		})
}

// printClusterStatus prints the nodes, then the partitions, then how many
// are under-replicated (fewer replicas in sync than assigned) or have no
// leader.
func printClusterStatus(out io.Writer, md kadm.Metadata) error {
	fmt.Fprintf(out, "Cluster %s, controller %d\n\n", md.Cluster, md.Controller)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tADDRESS\tROLE")
	brokers := slices.Clone(md.Brokers)
	slices.SortFunc(brokers, func(a, b kadm.BrokerDetail) int { return int(a.NodeID - b.NodeID) })
	for _, b := range brokers {
		role := "broker"
		if b.NodeID == md.Controller {
			role = "broker, controller"
		}
		fmt.Fprintf(w, "%d\t%s:%d\t%s\n", b.NodeID, b.Host, b.Port, role)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tIN-SYNC\tSTATE")
	var under, leaderless int
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			state := "ok"
			switch {
			case p.Leader < 0:
				state = "no leader"
				leaderless++
			case len(p.ISR) < len(p.Replicas):
				state = "under-replicated"
				under++
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", t.Topic, p.Partition, p.Leader, p.LeaderEpoch,
				joinIDs(p.Replicas), joinIDs(p.ISR), state)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\n%d under-replicated, %d without a leader\n", under, leaderless)
	return err
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
