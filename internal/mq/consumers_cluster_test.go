package mq

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// TestConsumersOfOtherNodes: node 3 lists the consumers of the clients of
// nodes 1 and 2 (as their front ends list them), each with its node and
// its arguments' field types, narrowed to a vhost and queue by the nodes
// themselves; node 2 out of contact is named, not waited for, and node
// 1's consumers are still listed; a node that never answers costs a
// listing statsWait, no more.
func TestConsumersOfOtherNodes(t *testing.T) {
	envs, calls := newClassicEnvs(t, 3)
	consumer := func(queue, tag string, port int) ConsumerDetail {
		return ConsumerDetail{VHost: "/", Queue: queue, Tag: tag, AckRequired: true, Prefetch: 5,
			Args:    amqpwire.Table{"x-priority": int32(3)},
			Channel: ConsumerChannel{Number: 1, Connection: fmt.Sprintf("127.0.0.1:%d -> 127.0.0.1:5672", port), User: "guest", PeerHost: "127.0.0.1", PeerPort: port}}
	}
	envs[0].v.r.ServeClientsWith(&fakeClients{consumers: []ConsumerDetail{consumer("orders", "a", 1001), consumer("audit", "b", 1002)}})
	envs[1].v.r.ServeClientsWith(&fakeClients{consumers: []ConsumerDetail{consumer("orders", "c", 2001)}})
	envs[2].v.r.ServeClientsWith(&fakeClients{consumers: []ConsumerDetail{consumer("orders", "own", 3001)}})

	listed := func(vhost, queue string) ([]string, []int32) {
		ks, unanswered := envs[2].v.r.ConsumersElsewhere(context.Background(), vhost, queue)
		var out []string
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%s/%s %s node %d port %d ack %v prefetch %d %T", k.VHost, k.Queue, k.Tag,
				k.Channel.Node, k.Channel.PeerPort, k.AckRequired, k.Prefetch, k.Args["x-priority"]))
		}
		slices.Sort(out)
		return out, unanswered
	}
	got, unanswered := listed("", "")
	want := []string{
		"//audit b node 1 port 1002 ack true prefetch 5 int32",
		"//orders a node 1 port 1001 ack true prefetch 5 int32",
		"//orders c node 2 port 2001 ack true prefetch 5 int32",
	}
	if !slices.Equal(got, want) || len(unanswered) != 0 {
		t.Fatalf("node 3 lists %q, unanswered %v; want %q", got, unanswered, want)
	}
	if got, _ := listed("/", "orders"); len(got) != 2 {
		t.Fatalf("node 3 lists of queue orders %q", got)
	}
	for _, req := range calls.ops(opConsumers)[2:] {
		if req.VHost != "/" || req.Name != "orders" {
			t.Fatalf("a listing of orders asked %+v", req)
		}
	}
	if got, _ := listed("other", ""); len(got) != 0 {
		t.Fatalf("node 3 lists of vhost other %q", got)
	}

	calls.setDown(2, true) // out of contact: not called
	before := len(calls.ops(opConsumers))
	got, unanswered = listed("", "")
	if !slices.Equal(got, want[:2]) || !slices.Equal(unanswered, []int32{2}) {
		t.Fatalf("with node 2 out of contact node 3 lists %q, unanswered %v", got, unanswered)
	}
	if asked := calls.ops(opConsumers)[before:]; len(asked) != 1 {
		t.Fatalf("with node 2 out of contact node 3 made %d calls, want node 1's alone", len(asked))
	}

	calls.setDown(2, false)
	envs[1].v.r.cfg.Cluster.HandleCalls(nil) // in contact, never answers
	start := time.Now()
	got, unanswered = listed("", "")
	if took := time.Since(start); !slices.Equal(got, want[:2]) || !slices.Equal(unanswered, []int32{2}) || took > 2*statsWait {
		t.Fatalf("with node 2 silent node 3 lists %q, unanswered %v, in %v", got, unanswered, took)
	}
}
