package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `wharf cluster status`: the nodes, which one is the controller, and
// every partition's leader, replicas and in-sync replicas, from the
// Kafka API's Metadata (any node answers for the whole cluster), and the
// reassignments in progress, then each quorum queue's leader and members
// (cluster_queues.go). `wharf cluster remove-node N`: N's quorum queue
// replicas are shrunk away, every partition replica on node N moves to
// another node, then N leaves the cluster.

// removeNodeTimeout bounds `wharf cluster remove-node`, which waits for
// the partitions to move.
const removeNodeTimeout = 10 * time.Minute

func runCluster(ctx context.Context, args []string, std stdio) error {
	cmds := []subcommandHelp{
		{"status", "show the nodes, the controller, each partition's leader and in-sync replicas, the reassignments in progress, and each quorum queue's leader and members"},
		{"remove-node", "move every replica (partitions and quorum queues) off a node, then remove it from the cluster"},
	}
	i, err := selectSubcommand("cluster", cmds, args, std)
	if i < 0 {
		return err
	}
	var api func() *mgmtClient
	defineAPI := func(fs *flag.FlagSet) { api = addAPIFlags(fs) }
	if cmds[i].name == "remove-node" {
		return runKafkaSubcommand(ctx, "cluster", "remove-node", "NODE-ID [flags]", cmds[i].summary, args[1:], std,
			defineAPI,
			func(env kafkaEnv, positional []string) error {
				if err := expectArgs(positional, 1, "node id"); err != nil {
					return err
				}
				id, err := strconv.ParseInt(positional[0], 10, 32)
				if err != nil || id <= 0 {
					return usagef("%q is not a node id", positional[0])
				}
				if err := env.reachable(); err != nil {
					return err
				}
				// Moving the replicas takes longer than one admin request.
				ctx, cancel := context.WithTimeout(ctx, removeNodeTimeout)
				defer cancel()
				if err := shrinkOff(ctx, api(), int32(id), env.out); err != nil {
					return fmt.Errorf("remove-node: %w", err)
				}
				return removeNode(ctx, env, int32(id))
			})
	}
	return runKafkaSubcommand(ctx, "cluster", "status", "[flags]", cmds[0].summary, args[1:], std,
		defineAPI,
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
			if err := printClusterStatus(env.out, md); err != nil {
				return err
			}
			// Any Wharf node answers from the metadata it applied: the
			// node asked answers while no controller is known, where
			// the request routed to the controller would wait for one.
			moving, err := listReassignments(env.ctx, seedRequestor{env.cl})
			if err != nil {
				return fmt.Errorf("cluster status: reassignments: %w", err)
			}
			printReassignments(env.out, moving)
			return printQuorumQueues(env.ctx, api(), env.out)
		})
}

// removeNode moves every replica off node, waits for the moves, then
// removes the node (Kafka's UnregisterBroker).
func removeNode(ctx context.Context, env kafkaEnv, node int32) error {
	md, err := env.adm.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("remove-node: %w", err)
	}
	req, moves, err := moveOff(md, node)
	if err != nil {
		return err
	}
	if moves > 0 {
		fmt.Fprintf(env.out, "Moving %d partitions off node %d\n", moves, node)
		if err := alterAssignments(ctx, env.adm, req); err != nil {
			return err
		}
		if err := waitReassignments(ctx, env.cl, env.out, moves); err != nil {
			return err
		}
	}
	unregister := kmsg.NewPtrUnregisterBrokerRequest()
	unregister.BrokerID = node
	resp, err := unregister.RequestWith(ctx, env.cl)
	if err != nil {
		return fmt.Errorf("remove-node: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return fmt.Errorf("remove-node: %w%s", err, msg)
	}
	_, err = fmt.Fprintf(env.out, "Node %d removed from the cluster\n", node)
	return err
}

// printClusterStatus prints the nodes, then the partitions, then how many
// are under-replicated (fewer replicas in sync than assigned) or have no
// leader.
func printClusterStatus(out io.Writer, md kadm.Metadata) error {
	controller := strconv.Itoa(int(md.Controller))
	if md.Controller < 0 {
		controller = "unknown (its metadata group elects a leader, or too few of its voters are up)"
	}
	fmt.Fprintf(out, "Cluster %s, controller %s\n\n", md.Cluster, controller)
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

// seedRequestor sends a request to the first seed broker that answers
// it, not to the broker franz-go would route it to (the controller).
type seedRequestor struct{ cl *kgo.Client }

func (r seedRequestor) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var errs []error
	for _, seed := range r.cl.SeedBrokers() {
		resp, err := seed.Request(ctx, req)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
