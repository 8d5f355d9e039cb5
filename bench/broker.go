package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
)

// wharf is an in-process Wharf node plus an admin client for it.
type wharf struct {
	node  *node.Node
	addr  string
	admin *kadm.Client
	cl    *kgo.Client // the admin client's connection
}

// startWharf runs a node with its data in dataDir and its Kafka listener on
// a free loopback port, with the broker's default durability (fsync before
// acks=all replies).
func startWharf(dataDir string, logger *slog.Logger) (*wharf, error) {
	n, err := node.Start(node.Config{
		DataDir:   dataDir,
		KafkaAddr: "127.0.0.1:0",
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	w, err := attachWharf(n)
	if err != nil {
		closeNode(n)
		return nil, err
	}
	return w, nil
}

// attachWharf wraps a running node (e.g. one from nodetest) with an admin
// client. Closing the result with closeAdmin leaves the node running.
func attachWharf(n *node.Node) (*wharf, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		return nil, err
	}
	return &wharf{node: n, addr: n.KafkaAddr(), admin: kadm.NewClient(cl), cl: cl}, nil
}

// closeAdmin closes only the admin client.
func (w *wharf) closeAdmin() { w.cl.Close() }

// close stops the admin client and the node (which fsyncs and closes every
// log).
func (w *wharf) close() error {
	w.closeAdmin()
	return closeNode(w.node)
}

func closeNode(n *node.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.Close(ctx)
}

// createTopic creates a topic with the given partition count.
func (w *wharf) createTopic(name string, partitions int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.admin.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return nil
}

// deleteTopic deletes a topic, freeing its disk space between runs.
func (w *wharf) deleteTopic(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := w.admin.DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	return nil
}

// endOffsets is the log end offset of every partition of topic.
func (w *wharf) endOffsets(topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := w.admin.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	ends := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends, nil
}
