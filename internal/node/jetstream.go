package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/jetstream"
	"github.com/wharf-mq/wharf/internal/nats"
	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// JetStream's place in the node: the core (internal/jetstream) keeps each
// stream in a Kafka topic of the broker (jetstream.TopicName: "js.<name>"),
// its definitions in the metadata log beside the queueing core's, and its
// consumer state in a compacted log of its own, DataDir/jetstream. The
// NATS front end serves its API once the NATS listener is bound; the
// Kafka core refuses its clients the deletion of a stream's topic.

// JetStream is off in a cluster. There a stream's log would be a
// replicated topic whose Raft leader may be another node, while the core
// appends only where it leads, keeps consumer state in a log of this
// node's alone and reads the definitions once, at start; and Core NATS
// does not route between nodes. Rather than a JetStream that works on one
// node and diverges on the others, a cluster node answers as nats-server
// with JetStream disabled: nothing subscribes to $JS.API.>, so requests
// get no responders (nats.go: "nats: jetstream not enabled"), and INFO
// leaves "jetstream" out. Core NATS and the subject bridge serve as on a
// single node. Nothing of streams an earlier version made in a cluster is
// touched: their topics stay, as Kafka topics like any other (no core
// guards them from deletion: a Kafka client is the only way left to them),
// and so do their definitions and each node's state log.

// stateDirName is the JetStream state log's directory in DataDir. It
// holds no partition.metadata, so the broker leaves it alone.
const stateDirName = "jetstream"

// streamTopicConfigs are the configs of a stream's topic: no Kafka
// retention (the stream's own limits decide what it keeps, and move the
// log start), and room for a largest NATS message with its headers.
var streamTopicConfigs = map[string]string{
	"retention.ms":      "-1",
	"retention.bytes":   "-1",
	"cleanup.policy":    "delete",
	"max.message.bytes": strconv.Itoa(8 << 20),
}

// openJetStream opens the JetStream core over the broker's topics and
// definitions; the caller closes the returned state log after the core.
func openJetStream(cfg Config, b *broker.Broker, logger *slog.Logger) (*jetstream.Service, replica.Log, error) {
	state, err := jetstream.OpenStateLog(filepath.Join(cfg.DataDir, stateDirName), logger.With("component", "jetstream"))
	if err != nil {
		return nil, nil, fmt.Errorf("node: open the JetStream state log: %w", err)
	}
	svc, err := jetstream.Open(jetstream.Config{
		Logs:        streamLogs{b},
		Definitions: b.Definitions(),
		State:       state,
		ServerName:  cfg.NATS.ServerName,
		Logger:      logger,
	})
	if err != nil {
		state.Close()
		return nil, nil, fmt.Errorf("node: open JetStream: %w", err)
	}
	return svc, state, nil
}

// reportJetStreamOff says once, at a cluster node's start, that JetStream
// is off, naming the streams an earlier version defined and their topics.
func reportJetStreamOff(b *broker.Broker, logger *slog.Logger) {
	const msg = "JetStream is off: it does not run in a cluster yet; Core NATS serves, and $JS.API requests get no responders (nats.go: jetstream not enabled)"
	streams, err := jetstream.DefinedStreams(b.Definitions())
	if err != nil {
		logger.Error("listing the JetStream streams defined before", "err", err)
	}
	if len(streams) == 0 {
		logger.Info(msg)
		return
	}
	topics := make([]string, len(streams))
	for i, name := range streams {
		topics[i] = jetstream.TopicName(name)
	}
	logger.Warn(msg+"; the streams defined before keep their messages in their Kafka topics, which Kafka clients read",
		"streams", streams, "topics", topics)
}

// jetstreamGuard answers the Kafka core's question whether a topic holds
// a stream, once the JetStream core (which opens after the broker) is
// attached.
type jetstreamGuard struct {
	svc atomic.Pointer[jetstream.Service]
}

func (g *jetstreamGuard) TopicInUse(topic string) (string, bool) {
	svc := g.svc.Load()
	if svc == nil {
		return "", false
	}
	return svc.TopicOwner(topic)
}

// streamLogs is jetstream.LogStore over the broker's topics: a stream is
// a topic of one partition.
type streamLogs struct{ b *broker.Broker }

func (l streamLogs) CreateLog(stream string) (jetstream.StreamLog, error) {
	topic := jetstream.TopicName(stream)
	_, err := l.b.CreateTopic(broker.TopicSpec{Name: topic, Partitions: 1, Configs: streamTopicConfigs}, false)
	if errors.Is(err, broker.ErrTopicExists) {
		return nil, fmt.Errorf("the Kafka topic %s, which would hold stream %s, exists already: delete it first", topic, stream)
	}
	if err != nil {
		return nil, fmt.Errorf("create the Kafka topic %s: %w", topic, err)
	}
	return l.OpenLog(stream)
}

func (l streamLogs) OpenLog(stream string) (jetstream.StreamLog, error) {
	t, err := l.b.Topic(jetstream.TopicName(stream))
	if err != nil {
		return nil, err
	}
	p, err := t.Partition(0)
	if err != nil {
		return nil, err
	}
	if err := p.Offline(); err != nil {
		return nil, err // damaged: the stream goes offline, alone
	}
	return streamLog{p}, nil
}

func (l streamLogs) DeleteLog(stream string) error {
	return l.b.DeleteTopicInUse(jetstream.TopicName(stream))
}

// streamLog is jetstream.StreamLog over partition 0 of a stream's topic.
type streamLog struct{ p *broker.Partition }

// Append produces with acks=1 and does not wait: the core acknowledges a
// publish after Sync, which group-commits the fsyncs of every publisher
// (whatever --fsync says: a JetStream acknowledgement means on disk).
func (l streamLog) Append(batch []byte) (int64, error) {
	off, _, _, err := l.p.ProduceAsync(batch, 1)
	return off, err
}

func (l streamLog) Sync() error { return l.p.Sync() }

func (l streamLog) Read(offset, maxBytes int64) (*replica.Slice, error) {
	return l.p.Read(offset, maxBytes)
}

func (l streamLog) StartOffset() int64 { return l.p.StartOffset() }
func (l streamLog) EndOffset() int64   { return l.p.EndOffset() }

func (l streamLog) DeleteBefore(offset int64) error {
	_, err := l.p.DeleteBefore(offset)
	return err
}

func (l streamLog) OffsetForTime(ms int64) (int64, bool, error) {
	off, _, found, err := l.p.OffsetForTime(ms)
	return off, found, err
}

// serveJetStream serves the JetStream API on the NATS router and starts
// the core's deliveries through it, where the core runs (not in a
// cluster).
func (n *Node) serveJetStream(router *subjects.Router) error {
	if n.cores.jetstream == nil {
		return nil
	}
	api, err := nats.NewJetStream(router, n.cores.jetstream, n.logger)
	if err != nil {
		return fmt.Errorf("node: serve the JetStream API: %w", err)
	}
	n.jetstreamAPI = api
	n.cores.jetstream.Start(api, api.StreamChanged)
	return nil
}
