package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// `wharf queues grow NODE [all|even]` and `wharf queues shrink NODE`:
// rabbitmq-queues grow and shrink, over the management API. The API
// answers once every change is applied, or after its own bound with the
// ones still in progress, which each quorum queue's leader carries on: the
// command then waits until /api/queues shows every queue's new members.

func defineQueuesGrow(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhosts := fs.String("vhost-pattern", "", "only queues of vhosts matching this regular expression")
	queues := fs.String("queue-pattern", "", "only queues whose names match this regular expression")
	membership := fs.String("membership", "promotable", "promotable or voter: either way a new member joins as a learner and votes once caught up")
	errorsOnly := fs.Bool("errors-only", false, "list only the queues whose change failed")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		strategy := "all"
		switch {
		case len(args) == 2:
			strategy = args[1]
		case len(args) != 1:
			return usagef("want NODE [all|even], got %d arguments", len(args))
		}
		if strategy != "all" && strategy != "even" {
			return usagef("the strategy is all or even, not %q", strategy)
		}
		if err := checkMembership(*membership); err != nil {
			return err
		}
		node, err := nodeArg(args[0])
		if err != nil {
			return err
		}
		body := map[string]any{"strategy": strategy, "vhost_pattern": *vhosts, "queue_pattern": *queues}
		_, err = changeQuorumMembers(ctx, api, http.MethodPost, node, "grow", body, *errorsOnly, std.out)
		return err
	}
}

// checkMembership takes rabbitmq-queues grow's --membership values that
// Wharf does as RabbitMQ's default, promotable: a new member is a learner
// until it has caught up, then votes. RabbitMQ's voter counts in the
// quorum at once, before it holds the log; Wharf does not do that, as the
// quorum then depends on a member that lacks it, and it takes voter as
// promotable, whose end is the same voter. A permanent non-voter it does
// not keep.
func checkMembership(m string) error {
	switch m {
	case "promotable", "voter":
		return nil
	case "non_voter":
		return usagef("--membership non_voter: Wharf keeps no members that never vote; use promotable")
	}
	return usagef("--membership is promotable or voter, not %q", m)
}

func defineQueuesShrink(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	errorsOnly := fs.Bool("errors-only", false, "list only the queues whose change failed")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "NODE"); err != nil {
			return err
		}
		node, err := nodeArg(args[0])
		if err != nil {
			return err
		}
		_, err = changeQuorumMembers(ctx, api, http.MethodDelete, node, "shrink", nil, *errorsOnly, std.out)
		return err
	}
}

// nodeArg is a node given as its id or its name, wharf@<id>.
func nodeArg(s string) (int32, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "wharf@"), 10, 32)
	if err != nil || id <= 0 {
		return 0, usagef("%q is not a node id", s)
	}
	return int32(id), nil
}

// membershipChange is one queue's change as the API recorded it.
type membershipChange struct {
	VHost   string   `json:"vhost"`
	Name    string   `json:"name"`
	Members []string `json:"members"`
	Target  []string `json:"target"`
	Error   *string  `json:"error"`
	// Pending is a change recorded but not applied while the API waited:
	// its leader carries it on, and the command waits for it.
	Pending bool `json:"pending"`
}

// quorumQueueMembers is what /api/queues shows of a queue's membership.
type quorumQueueMembers struct {
	VHost   string   `json:"vhost"`
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Leader  *string  `json:"leader"`
	Members []string `json:"members"`
	Online  []string `json:"online"`
}

// changeQuorumMembers asks the API to grow or shrink (action) the quorum
// queues onto or off node, prints the changes (errorsOnly: only those that
// failed), and waits until they are done. It returns the queues that
// refused theirs (as rabbitmq-queues, it lists them and does not fail for
// them).
func changeQuorumMembers(ctx context.Context, api *mgmtClient, method string, node int32, action string, body any, errorsOnly bool, out io.Writer) (refused []string, err error) {
	var changes []membershipChange
	path := apiPath("queues", "quorum", "replicas", "on", strconv.Itoa(int(node)), action)
	if err := api.do(ctx, method, path, body, &changes); err != nil {
		return nil, fmt.Errorf("queues %s: %w", action, err)
	}
	t := newTable(out, "VHOST", "QUEUE", "MEMBERS", "NEW MEMBERS", "ERROR")
	var pending []membershipChange
	for _, c := range changes {
		reason := ""
		switch {
		case c.Pending:
			reason = "in progress"
			pending = append(pending, c)
		case c.Error != nil:
			reason = *c.Error
			refused = append(refused, fmt.Sprintf("%q in vhost %q", c.Name, c.VHost))
		default:
			pending = append(pending, c)
		}
		if !errorsOnly || (c.Error != nil && !c.Pending) {
			t.row(c.VHost, c.Name, strings.Join(c.Members, ","), strings.Join(c.Target, ","), reason)
		}
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintf(out, "No quorum queue to %s\n", action)
		return nil, err
	}
	if err := t.flush(); err != nil {
		return nil, err
	}
	if err := awaitQuorumMembers(ctx, api, pending); err != nil {
		return nil, fmt.Errorf("queues %s: %w", action, err)
	}
	_, err = fmt.Fprintf(out, "%d queues changed, %d refused\n", len(pending), len(refused))
	return refused, err
}

// membershipPoll is how often a waiting command reads the queues.
const membershipPoll = 200 * time.Millisecond

// awaitQuorumMembers waits until /api/queues shows every change's queue
// with its new members (or gone).
func awaitQuorumMembers(ctx context.Context, api *mgmtClient, changes []membershipChange) error {
	for {
		var qs []quorumQueueMembers
		if err := api.do(ctx, http.MethodGet, apiPath("queues"), nil, &qs); err != nil {
			return err
		}
		var left []string
		for _, c := range changes {
			i := slices.IndexFunc(qs, func(q quorumQueueMembers) bool { return q.VHost == c.VHost && q.Name == c.Name })
			if i >= 0 && !sameNodes(qs[i].Members, c.Target) {
				left = append(left, fmt.Sprintf("%q in vhost %q", c.Name, c.VHost))
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still changing (their leaders carry on): %s", strings.Join(left, ", "))
		case <-time.After(membershipPoll):
		}
	}
}

func sameNodes(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
