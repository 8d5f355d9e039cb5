package jetstream

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// Config is what a Service keeps its streams and state in.
type Config struct {
	// Logs holds each stream's messages (the node's: Kafka topics).
	Logs LogStore
	// Definitions holds stream and consumer definitions (the node's: the
	// metadata log).
	Definitions Definitions
	// State is the compacted log of consumer state and explicit
	// deletions (see stateLog). The service writes it; its owner opens
	// and closes it.
	State replica.Log
	// ServerName is the stream leader clients see in stream info.
	ServerName string
	// StateFlushInterval is how often changed consumer state is written
	// (default 100ms): a crash loses at most this much of acknowledgements,
	// whose messages are then delivered again.
	StateFlushInterval time.Duration
	Logger             *slog.Logger // nil: discard
}

const (
	defaultStateFlushInterval = 100 * time.Millisecond
	housekeepingInterval      = time.Second
)

// Service is the JetStream core: streams and their consumers. Every
// method is safe for concurrent use. Open loads it, Start begins
// delivering, Close stops it.
type Service struct {
	cfg    Config
	log    *slog.Logger
	state  stateLog
	syncer *replica.Syncer // publish acknowledgements wait here for fsync

	adminMu sync.Mutex // orders creates, updates and deletes
	mu      sync.RWMutex
	streams map[string]*stream

	outbox   Outbox
	observer StreamObserver
	stop     chan struct{}
	wg       sync.WaitGroup
	started  bool
}

// Outbox is where the service sends what it delivers: the front end's
// routing.
type Outbox interface {
	// Send routes m to the subscribers of to, showing them m.Subject
	// (a stored message's own subject, not the deliver subject or inbox
	// it travels on) and reports whether anyone took it.
	Send(to string, m *OutMessage) bool
	// Interest reports whether anyone subscribes to subject.
	Interest(subject string) bool
}

// OutMessage is a message the service sends.
type OutMessage struct {
	Subject string
	Reply   string
	Header  []byte
	Data    []byte
}

// StreamObserver hears of every stream created (or updated: cfg is its
// configuration) and deleted (cfg nil), after the fact; the front end
// keeps its subscriptions to the streams' subjects with it.
type StreamObserver func(name string, cfg *StreamConfig)

// Keys of the definitions, under the metadata log's "jetstream/" prefix.
const (
	defPrefix         = "jetstream/"
	streamDefPrefix   = defPrefix + "stream/"
	consumerDefPrefix = defPrefix + "consumer/"
)

func streamDefKey(name string) string { return streamDefPrefix + name }
func consumerDefKey(stream, name string) string {
	return consumerDefPrefix + stream + "/" + name
}

// streamDef is a stream's definition record.
type streamDef struct {
	Config  StreamConfig `json:"config"`
	Created time.Time    `json:"created"`
	ID      string       `json:"id"`
}

// consumerDef is a consumer's definition record.
type consumerDef struct {
	Stream  string         `json:"stream"`
	Config  ConsumerConfig `json:"config"`
	Created time.Time      `json:"created"`
	ID      string         `json:"id"`
}

// Open loads every stream and consumer: each stream's log is read back
// into its state, each consumer's state from the state log.
func Open(cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StateFlushInterval <= 0 {
		cfg.StateFlushInterval = defaultStateFlushInterval
	}
	svc := &Service{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "jetstream"),
		state:   stateLog{cfg.State},
		streams: map[string]*stream{},
		stop:    make(chan struct{}),
	}
	state, err := svc.state.load()
	if err != nil {
		return nil, err
	}
	streams, consumers, err := svc.loadDefinitions()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, def := range streams {
		log, err := cfg.Logs.OpenLog(def.Config.Name)
		if err != nil {
			svc.log.Error("jetstream: stream not loaded: its log cannot be opened", "stream", def.Config.Name, "err", err)
			continue
		}
		s := newStream(svc, def, log)
		var st streamState
		if b := state[streamStateKey(def.ID)]; b != nil {
			if err := json.Unmarshal(b, &st); err != nil {
				return nil, fmt.Errorf("jetstream: stream %s: state record: %w", def.Config.Name, err)
			}
		}
		if err := s.rebuild(st, now); err != nil {
			return nil, err
		}
		svc.streams[s.name] = s
	}
	for _, def := range consumers {
		s := svc.streams[def.Stream]
		if s == nil {
			svc.log.Warn("jetstream: consumer of a missing stream not loaded", "stream", def.Stream, "consumer", def.Config.Name)
			continue
		}
		c := newConsumer(s, def.Config, def.ID, def.Created)
		s.mu.Lock()
		if b := state[consumerStateKey(def.ID)]; b != nil {
			var st consumerState
			if err := json.Unmarshal(b, &st); err != nil {
				s.mu.Unlock()
				return nil, fmt.Errorf("jetstream: consumer %s > %s: state record: %w", def.Stream, c.name, err)
			}
			c.restoreLocked(st)
		} else if err := c.startLocked(); err != nil { // created, then the node stopped before its state was written
			s.mu.Unlock()
			return nil, fmt.Errorf("jetstream: consumer %s > %s: %w", def.Stream, c.name, err)
		}
		s.consumers[c.name] = c
		s.mu.Unlock()
		c.fillSubjects()
	}
	svc.syncer = replica.StartSyncer()
	return svc, nil
}

// loadDefinitions reads the stream and consumer definitions, in name
// order.
func (svc *Service) loadDefinitions() ([]streamDef, []consumerDef, error) {
	var streams []streamDef
	var consumers []consumerDef
	err := svc.cfg.Definitions.Load(func(key string, value []byte) error {
		switch {
		case strings.HasPrefix(key, streamDefPrefix):
			var def streamDef
			if err := json.Unmarshal(value, &def); err != nil {
				return fmt.Errorf("jetstream: definition %s: %w", key, err)
			}
			streams = append(streams, def)
		case strings.HasPrefix(key, consumerDefPrefix):
			var def consumerDef
			if err := json.Unmarshal(value, &def); err != nil {
				return fmt.Errorf("jetstream: definition %s: %w", key, err)
			}
			consumers = append(consumers, def)
		}
		return nil
	})
	slices.SortFunc(streams, func(a, b streamDef) int { return strings.Compare(a.Config.Name, b.Config.Name) })
	return streams, consumers, err
}

// Start begins delivering through outbox (consumers, heartbeats) and the
// background work (limits by age, state writes); observer hears of every
// stream now and as they change.
func (svc *Service) Start(outbox Outbox, observer StreamObserver) {
	svc.mu.Lock()
	svc.outbox, svc.observer = outbox, observer
	svc.started = true
	streams := slices.Collect(maps.Values(svc.streams))
	svc.mu.Unlock()
	for _, s := range streams {
		cfg := s.config()
		observer(s.name, &cfg)
		s.mu.Lock()
		for _, c := range s.consumers {
			c.launchLocked(outbox)
		}
		s.mu.Unlock()
	}
	svc.wg.Add(2)
	go svc.housekeeping()
	go svc.stateFlusher()
}

// Close stops every goroutine of the service and writes the state that
// changed since the last write.
func (svc *Service) Close() error {
	svc.mu.Lock()
	started := svc.started
	svc.started = false
	streams := slices.Collect(maps.Values(svc.streams))
	svc.mu.Unlock()
	if started {
		close(svc.stop)
		svc.wg.Wait()
	}
	for _, s := range streams {
		s.mu.Lock()
		cs := slices.Collect(maps.Values(s.consumers))
		s.mu.Unlock()
		for _, c := range cs {
			c.halt()
		}
	}
	err := svc.flushState()
	svc.syncer.Shutdown()
	return err
}

func (svc *Service) stream(name string) (*stream, *APIError) {
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	s := svc.streams[name]
	if s == nil {
		return nil, ErrStreamNotFound
	}
	return s, nil
}

// TopicOwner names the stream whose log the Kafka topic is, if any (the
// Kafka core then refuses its clients the topic's deletion).
func (svc *Service) TopicOwner(topic string) (string, bool) {
	name, ok := strings.CutPrefix(topic, topicPrefix)
	if !ok {
		return "", false
	}
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	if svc.streams[name] == nil {
		return "", false
	}
	return "JetStream stream '" + name + "'", true
}

// StreamNames returns the names of the streams whose subjects overlap
// subject (all when it is empty), sorted.
func (svc *Service) StreamNames(subject string) []string {
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	var names []string
	for name, s := range svc.streams {
		if subject == "" || slices.ContainsFunc(s.config().Subjects, func(p string) bool { return subjectsCollide(p, subject) }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Publish stores a message published to one of stream's subjects and
// calls done with its acknowledgement once the message is committed
// (fsynced), or at once with the error that refused it. done runs on the
// caller's goroutine or the service's syncer; nil means nobody waits for
// the acknowledgement (a publish without a reply subject).
func (svc *Service) Publish(stream, subject string, header, data []byte, done func(PubAck, *APIError)) {
	s, err := svc.stream(stream)
	var ack PubAck
	if err == nil {
		s.mu.Lock()
		ack, err = s.publishLocked(subject, header, data, time.Now())
		s.mu.Unlock()
	}
	switch {
	case done == nil:
	case err != nil:
		done(PubAck{Stream: stream}, err)
	default:
		svc.acknowledge(s, ack, done)
	}
}

// acknowledge calls done with ack once the syncer has committed the
// stream's log up to it.
func (svc *Service) acknowledge(s *stream, ack PubAck, done func(PubAck, *APIError)) {
	stream := s.name
	svc.syncer.Await([]replica.Target{s.log}, func(serr error) {
		if serr != nil {
			svc.log.Error("jetstream: commit a publish", "stream", stream, "seq", ack.Seq, "err", serr)
			done(PubAck{Stream: stream}, ErrStreamStore(serr))
			return
		}
		done(ack, nil)
	})
}

// newID returns a random identifier for a stream or consumer incarnation,
// or an ephemeral consumer's name (8 characters, as nats-server's).
func newID(n int) string { return rand.Text()[:n] }
