package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestAMQPDeclareRace: three `wharf serve` processes; clients on nodes 1
// and 2 declare the same 50 new durable queues (40 classic, 10 quorum)
// at once, name by name, and each publishes one confirmed message to
// each. Every declare gets declare-ok; every node shows one queue per
// name (the same home node, or the same members), and both clients'
// confirmed messages are all consumed from node 3. Before declarations
// were create-if-absent, both nodes wrote the name's record, each answered
// declare-ok for a queue of its own, and the loser's was replaced, its
// confirmed messages stranded (or the record deleted by the node
// replacing it).
func TestAMQPDeclareRace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	conns := []*amqp.Connection{dialAMQP(t, nodes[0].amqp), dialAMQP(t, nodes[1].amqp)}

	const queues, quorums = 50, 10
	name := func(i int) string { return "race" + strconv.Itoa(i) }
	args := func(i int) amqp.Table {
		if i < quorums {
			return amqp.Table{"x-queue-type": "quorum"}
		}
		return nil
	}
	start := make(chan struct{})
	errs := make(chan error, 2*queues)
	var wg sync.WaitGroup
	for i := range queues {
		for c, conn := range conns {
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Confirm(false); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer ch.Close()
				<-start
				if _, err := ch.QueueDeclare(name(i), true, false, false, false, args(i)); err != nil {
					errs <- fmt.Errorf("node %d's declare of %s: %w", c+1, name(i), err)
					return
				}
				body := fmt.Sprintf("%d:%s", c+1, name(i))
				confirmed, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				conf, err := ch.PublishWithDeferredConfirmWithContext(confirmed, "", name(i), false, false,
					amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent})
				if err == nil {
					var acked bool
					if acked, err = conf.WaitContext(confirmed); err == nil && !acked {
						err = fmt.Errorf("nacked")
					}
				}
				if err != nil {
					errs <- fmt.Errorf("confirm of %s: %w", body, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every node shows each queue alike: a classic queue's home node, a
	// quorum queue's members.
	for i := range queues {
		var seen []string
		for _, a := range nodes {
			var v queueView
			waitFor(t, ctx, fmt.Sprintf("node %d shows %s", a.id, name(i)), func() bool {
				var err error
				v, err = a.queue(ctx, name(i))
				return err == nil && (i >= quorums || len(v.Members) > 0)
			})
			where := v.Node
			if i < quorums {
				where = fmt.Sprint(v.Members)
			}
			seen = append(seen, where)
		}
		if distinct := slices.Compact(slices.Clone(seen)); len(distinct) != 1 {
			t.Errorf("%s: the nodes show %v", name(i), seen)
		}
	}

	// Both clients' confirmed messages are in the one queue.
	ch3 := channel(t, dialAMQP(t, nodes[2].amqp))
	for i := range queues {
		var got []string
		for {
			m, ok, err := ch3.Get(name(i), true)
			if err != nil {
				t.Fatalf("basic.get of %s on node 3: %v", name(i), err)
			}
			if !ok {
				break
			}
			got = append(got, string(m.Body))
		}
		slices.Sort(got)
		if want := []string{"1:" + name(i), "2:" + name(i)}; !slices.Equal(got, want) {
			t.Errorf("%s holds %q, want %q", name(i), got, want)
		}
	}
}
