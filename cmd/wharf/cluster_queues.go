package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// What `wharf cluster` does with quorum queues, over the management API
// (their membership is not Kafka's): status lists each one's leader and
// members, remove-node shrinks them off the node first.

// addAPIFlags adds the management API's flags to a cluster command.
func addAPIFlags(fs *flag.FlagSet) func() *mgmtClient {
	server := fs.String("http-server", "localhost"+defaultHTTPAddr, "management API address, host:port or a URL (for quorum queues)")
	// --user and --password are the Kafka listener's SASL login here.
	user := fs.String("http-user", "guest", "management API user name")
	password := fs.String("http-password", "guest", "management API password")
	return func() *mgmtClient { return newMgmtClient(*server, *user, *password) }
}

// noAPIAnswer reports whether err is no answer from the management API
// at all (none listens there), as opposed to an answer refusing.
func noAPIAnswer(err error) bool {
	var ae *apiError
	return err != nil && !errors.As(err, &ae)
}

// printQuorumQueues prints every quorum queue's leader, members and
// online members; a management API that does not answer is noted.
func printQuorumQueues(ctx context.Context, api *mgmtClient, out io.Writer) error {
	var qs []quorumQueueMembers
	if err := api.do(ctx, http.MethodGet, apiPath("queues"), nil, &qs); err != nil {
		if noAPIAnswer(err) {
			_, err = fmt.Fprintf(out, "\nQuorum queues not listed: %v\n", err)
		}
		return err
	}
	t := newTable(out, "QUORUM QUEUE", "VHOST", "LEADER", "MEMBERS", "ONLINE")
	n := 0
	for _, q := range qs {
		if q.Type != "quorum" || q.Members == nil {
			continue
		}
		leader := "none"
		if q.Leader != nil {
			leader = *q.Leader
		}
		t.row(q.Name, q.VHost, leader, strings.Join(q.Members, ","), strings.Join(q.Online, ","))
		n++
	}
	fmt.Fprintln(out)
	if n == 0 {
		_, err := fmt.Fprintln(out, "No quorum queues")
		return err
	}
	return t.flush()
}

// shrinkOff removes node's replicas from every quorum queue and waits
// for it. A management API that does not answer is noted and skipped:
// the node may have no quorum queues to leave. A queue whose only member
// the node is stops the removal: its messages would go with the node.
func shrinkOff(ctx context.Context, api *mgmtClient, node int32, out io.Writer) error {
	refused, err := changeQuorumMembers(ctx, api, http.MethodDelete, node, "shrink", nil, false, out)
	switch {
	case noAPIAnswer(err):
		_, err = fmt.Fprintf(out, "Quorum queues not shrunk (pass --http-server if node %d holds replicas): %v\n", node, err)
		return err
	case err != nil:
		return err
	case len(refused) > 0:
		return fmt.Errorf("node %d is the only member of quorum queues %s: grow them onto another node (wharf queues grow) or delete them first",
			node, strings.Join(refused, ", "))
	}
	return nil
}
