package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

func queuesCommands() []apiCommand {
	return []apiCommand{
		{"list", "[--vhost /]", "list a vhost's queues with their messages, consumers and rates", defineQueuesList},
		{"get", "QUEUE [--count 1] [--ackmode ack_requeue_true] [--vhost /]", "show messages from the head of a queue", defineQueuesGet},
		{"purge", "QUEUE [--vhost /]", "remove a queue's ready messages", defineQueuesPurge},
		{"delete", "QUEUE [--if-empty] [--if-unused] [--vhost /]", "delete a queue", defineQueuesDelete},
		{"grow", "NODE [all|even] [--vhost-pattern RE] [--queue-pattern RE] [--membership promotable] [--errors-only]",
			"add a node as a member to the quorum queues that lack it (all, or those with an even number of members)", defineQueuesGrow},
		{"shrink", "NODE [--errors-only]", "remove a node's replica from every quorum queue, never below one member", defineQueuesShrink},
	}
}

func runQueues(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "queues", queuesCommands(), args, std)
}

// rate is a *_details object.
type rate struct {
	Rate float64 `json:"rate"`
}

func defineQueuesList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		var qs []struct {
			Name         string `json:"name"`
			Type         string `json:"type"`
			Durable      bool   `json:"durable"`
			Ready        int64  `json:"messages_ready"`
			Unacked      int64  `json:"messages_unacknowledged"`
			Consumers    int    `json:"consumers"`
			Policy       string `json:"policy"`
			MessageStats struct {
				Publish    rate `json:"publish_details"`
				DeliverGet rate `json:"deliver_get_details"`
				Ack        rate `json:"ack_details"`
			} `json:"message_stats"`
		}
		if err := api.do(ctx, http.MethodGet, apiPath("queues", *vhost), nil, &qs); err != nil {
			return err
		}
		t := newTable(std.out, "NAME", "TYPE", "DURABLE", "READY", "UNACKED", "CONSUMERS", "PUBLISH/S", "DELIVER/S", "ACK/S", "POLICY")
		for _, q := range qs {
			t.row(q.Name, q.Type, q.Durable, q.Ready, q.Unacked, q.Consumers, perSecond(q.MessageStats.Publish),
				perSecond(q.MessageStats.DeliverGet), perSecond(q.MessageStats.Ack), q.Policy)
		}
		return t.flush()
	}
}

func perSecond(r rate) string { return strconv.FormatFloat(r.Rate, 'f', 1, 64) }

func defineQueuesGet(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	count := fs.Int("count", 1, "at most this many messages")
	ackmode := fs.String("ackmode", "ack_requeue_true",
		"what happens to them: ack_requeue_true (put back, marked redelivered), ack_requeue_false (taken), "+
			"reject_requeue_true, reject_requeue_false (dead-lettered, if the queue has a dead-letter exchange)")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "QUEUE"); err != nil {
			return err
		}
		body := map[string]any{"count": *count, "ackmode": *ackmode, "encoding": "auto"}
		var ms []struct {
			Payload         string         `json:"payload"`
			PayloadEncoding string         `json:"payload_encoding"`
			PayloadBytes    int            `json:"payload_bytes"`
			Redelivered     bool           `json:"redelivered"`
			Exchange        string         `json:"exchange"`
			RoutingKey      string         `json:"routing_key"`
			MessageCount    int            `json:"message_count"`
			Properties      map[string]any `json:"properties"`
		}
		if err := api.do(ctx, http.MethodPost, apiPath("queues", *vhost, args[0], "get"), body, &ms); err != nil {
			return err
		}
		t := newTable(std.out, "ROUTING_KEY", "EXCHANGE", "REMAINING", "REDELIVERED", "PROPERTIES", "ENCODING", "PAYLOAD")
		for _, m := range ms {
			t.row(m.RoutingKey, strconv.Quote(m.Exchange), m.MessageCount, m.Redelivered, compactJSON(m.Properties),
				m.PayloadEncoding, m.Payload)
		}
		return t.flush()
	}
}

func defineQueuesPurge(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "QUEUE"); err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodDelete, apiPath("queues", *vhost, args[0], "contents"), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Purged queue %q in vhost %q\n", args[0], *vhost)
		return nil
	}
}

func defineQueuesDelete(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	ifEmpty := fs.Bool("if-empty", false, "only if the queue has no messages")
	ifUnused := fs.Bool("if-unused", false, "only if the queue has no consumers")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "QUEUE"); err != nil {
			return err
		}
		conditions := url.Values{}
		if *ifEmpty {
			conditions.Set("if-empty", "true")
		}
		if *ifUnused {
			conditions.Set("if-unused", "true")
		}
		path := apiPath("queues", *vhost, args[0])
		if len(conditions) > 0 {
			path += "?" + conditions.Encode()
		}
		if err := api.do(ctx, http.MethodDelete, path, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Deleted queue %q in vhost %q\n", args[0], *vhost)
		return nil
	}
}
