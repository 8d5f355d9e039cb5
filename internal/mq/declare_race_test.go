package mq

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/raft"
)

// TestClusterDeclareRace: two nodes declare the same new durable queue
// at once (node 1's definition write held back until node 2's landed):
// node 2's declaration creates the queue, node 1's write is ignored and
// node 1 answers as a redeclare of node 2's queue (declare-ok if the
// arguments are equivalent, else 406); every node holds that queue, with
// node 2's id, and no replica of a group node 1 made up.
func TestClusterDeclareRace(t *testing.T) {
	for _, kind := range []string{"classic", "quorum"} {
		for _, equivalent := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/equivalent=%v", kind, equivalent), func(t *testing.T) {
				envs := newQuorumEnvs(t, 3, raft.NewMemNetwork())
				args := func(maxLength int64) amqpwire.Table {
					return amqpwire.Table{"x-queue-type": kind, "x-max-length": maxLength}
				}
				held, release := holdFirstWrite(t, envs, queueKey(DefaultVHost, "q")) // node 1's
				first := make(chan error, 1)
				go func() {
					maxLength := int64(10)
					if !equivalent {
						maxLength = 20
					}
					_, err := envs[0].v.DeclareQueue(QueueDef{Name: "q", Durable: true, Args: args(maxLength)}, false)
					first <- err
				}()
				<-held
				if _, err := envs[1].v.DeclareQueue(QueueDef{Name: "q", Durable: true, Args: args(10)}, false); err != nil {
					t.Fatalf("node 2's declare: %v", err)
				}
				winner := envs[1].queueNamed("q").id
				release()
				err := <-first
				if equivalent && err != nil {
					t.Fatalf("node 1's declare of an equivalent queue: %v", err)
				}
				if !equivalent {
					wantInequivalent(t, err, "x-max-length")
				}

				value, live := envs[0].cfg.Cluster.Get(queueKey(DefaultVHost, "q"))
				var rec queueRecord
				if !live || json.Unmarshal(value, &rec) != nil || rec.ID != winner {
					t.Fatalf("the queue's record is %s (live %v), want node 2's, id %s", value, live, winner)
				}
				for i, e := range envs {
					eventually(t, fmt.Sprintf("node %d holds node 2's queue", i+1), func() bool {
						q := e.v.queue("q")
						return q != nil && q.id == winner
					})
				}
				if kind == "quorum" {
					servingNode(t, envs, "q")
					for i, e := range envs {
						e.r.quorumMu.Lock()
						for m := range e.r.quorumReplicas {
							if m.q.id != winner {
								t.Errorf("node %d holds a replica of queue id %s, not node 2's %s", i+1, m.q.id, winner)
							}
						}
						e.r.quorumMu.Unlock()
					}
				}
			})
		}
	}
}

// TestClusterExchangeDeclareRace: two nodes declare the same new durable
// exchange at once with different types: the first write applied creates
// it on every node, the other declare gets 406.
func TestClusterExchangeDeclareRace(t *testing.T) {
	envs := newClusterEnvs(t, 2)
	held, release := holdFirstWrite(t, envs, exchangeKey(DefaultVHost, "x"))
	first := make(chan error, 1)
	go func() {
		first <- envs[0].v.DeclareExchange(ExchangeDef{Name: "x", Type: "fanout", Durable: true}, false)
	}()
	<-held
	envs[1].declareExchange("x", "direct", true, nil)
	release()
	wantInequivalent(t, <-first, "type")
	for i, e := range envs {
		eventually(t, fmt.Sprintf("node %d holds the direct exchange", i+1), func() bool {
			x := e.v.exchange("x")
			return x != nil && x.def.Type == "direct"
		})
	}
}

// wantInequivalent checks that err is RabbitMQ's 406 for a declare whose
// arg differs from the existing one's.
func wantInequivalent(t *testing.T, err error, arg string) {
	t.Helper()
	wantCode(t, err, amqpwire.CodePreconditionFailed, "")
	if want := "inequivalent arg '" + arg + "'"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want one with %q", err, want)
	}
}

// holdFirstWrite holds the first write of key back until release (at the
// test's end at the latest); the writes after it go through.
func holdFirstWrite(t *testing.T, envs []*env, key string) (held <-chan struct{}, release func()) {
	defs := envs[0].cfg.Definitions.(nodeDefs).c
	first, released := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	var taken atomic.Bool
	delay := func(k string, _ []byte) {
		if k == key && taken.CompareAndSwap(false, true) {
			close(first)
			<-released
		}
	}
	defs.delay.Store(&delay)
	return first, release
}

// TestClusterRedeclareFollowedLate: a node that follows a queue's
// deletion and declaration again only once both are applied (it sees the
// new record at once) replaces its queue with the new one and writes
// nothing: the new queue's record and its binding stay.
func TestClusterRedeclareFollowedLate(t *testing.T) {
	envs := newClusterEnvs(t, 2)
	envs[0].declareQueue("q", true)
	envs[0].declareExchange("x", "direct", true, nil)
	envs[0].bind("q", "x", "k", nil)
	eventually(t, "node 2 follows", func() bool { return envs[1].v.queue("q") != nil })
	old := envs[0].queueNamed("q").id

	late := envs[1].v
	late.defMu.Lock() // node 2's follower waits here
	if _, err := envs[0].v.DeleteQueue("q", false, false, 0); err != nil {
		late.defMu.Unlock()
		t.Fatal(err)
	}
	envs[0].declareQueue("q", true)
	envs[0].bind("q", "x", "k", nil)
	late.defMu.Unlock()

	renewed := envs[0].queueNamed("q").id
	eventually(t, "node 2 holds the new queue", func() bool {
		q := late.queue("q")
		return q != nil && q.id == renewed && q.id != old
	})
	value, live := envs[0].cfg.Cluster.Get(queueKey(DefaultVHost, "q"))
	var rec queueRecord
	if !live || json.Unmarshal(value, &rec) != nil || rec.ID != renewed {
		t.Fatalf("the queue's record is %s (live %v), want the new one, id %s", value, live, renewed)
	}
	n := 0
	envs[0].cfg.Definitions.Load(func(key string, _ []byte) error {
		if strings.HasPrefix(key, bindingKeyPrefix) {
			n++
		}
		return nil
	})
	if n != 1 {
		t.Fatalf("%d binding records, want the new queue's one", n)
	}
}

// TestClusterStreamDeclareRace: two nodes declare the same new stream
// queue at once (node 1's definition write held back until node 2's
// landed): node 2's declaration creates it, and node 1 answers as a
// redeclare of it, declare-ok if the arguments are equivalent, else 406;
// the queue's record and every node's queue are node 2's.
func TestClusterStreamDeclareRace(t *testing.T) {
	for _, equivalent := range []bool{true, false} {
		t.Run(fmt.Sprintf("equivalent=%v", equivalent), func(t *testing.T) {
			streams := newFakeStreams(t)
			c := newClusterDefs()
			envs := make([]*env, 2)
			for i := range envs {
				d := nodeDefs{c: c, node: int32(i + 1)}
				envs[i] = newEnv(t, func(cfg *Config) { cfg.Definitions, cfg.Cluster, cfg.Streams = d, d.cluster(), streams })
			}
			held, release := holdFirstWrite(t, envs, queueKey(DefaultVHost, "s"))
			first := make(chan error, 1)
			go func() {
				maxBytes := int64(1000)
				if !equivalent {
					maxBytes = 2000
				}
				_, err := envs[0].v.DeclareQueue(QueueDef{Name: "s", Durable: true,
					Args: streamArgs(amqpwire.Table{"x-max-length-bytes": maxBytes})}, false)
				first <- err
			}()
			<-held
			if _, err := envs[1].v.DeclareQueue(QueueDef{Name: "s", Durable: true,
				Args: streamArgs(amqpwire.Table{"x-max-length-bytes": int64(1000)})}, false); err != nil {
				t.Fatalf("node 2's declare: %v", err)
			}
			release()
			err := <-first
			if equivalent && err != nil {
				t.Fatalf("node 1's declare of an equivalent stream queue: %v", err)
			}
			if !equivalent {
				wantInequivalent(t, err, "x-max-length-bytes")
			}
			value, live := envs[0].cfg.Cluster.Get(queueKey(DefaultVHost, "s"))
			var rec queueRecord
			if !live || json.Unmarshal(value, &rec) != nil {
				t.Fatalf("the queue's record is %s (live %v)", value, live)
			}
			if args, err := decodeArgs(rec.Args); err != nil || fmt.Sprint(args["x-max-length-bytes"]) != "1000" {
				t.Fatalf("the queue's record has arguments %v (%v), want node 2's", args, err)
			}
			for i, e := range envs {
				eventually(t, fmt.Sprintf("node %d holds node 2's stream queue", i+1), func() bool {
					q := e.v.queue("s")
					return q != nil && q.stream != nil && fmt.Sprint(q.def.Args["x-max-length-bytes"]) == "1000"
				})
			}
		})
	}
}
