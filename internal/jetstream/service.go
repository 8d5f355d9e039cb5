package jetstream

import (
	"crypto/rand"
	"encoding/json"
	"errors"
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
	offline map[string]*offlineStream

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
		offline: map[string]*offlineStream{},
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
	for _, def := range streams {
		if err := svc.loadStream(def, state); err != nil {
			svc.log.Error("jetstream: stream offline: it cannot be loaded", "stream", def.Config.Name, "err", err)
			svc.offline[def.Config.Name] = &offlineStream{def: def, err: err}
		}
	}
	for _, def := range consumers {
		if o := svc.offline[def.Stream]; o != nil {
			o.consumers = append(o.consumers, def)
			continue
		}
		if err := svc.loadConsumer(def, state); err != nil {
			svc.log.Error("jetstream: consumer not loaded", "stream", def.Stream, "consumer", def.Config.Name, "err", err)
		}
	}
	svc.syncer = replica.StartSyncer()
	return svc, nil
}

// loadStream opens a stream's log and rebuilds its state.
func (svc *Service) loadStream(def streamDef, state map[string][]byte) error {
	log, err := svc.cfg.Logs.OpenLog(def.Config.Name)
	if err != nil {
		return fmt.Errorf("open its log: %w", err)
	}
	var st streamState
	if b := state[streamStateKey(def.ID)]; b != nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("its state record: %w", err)
		}
	}
	s := newStream(svc, def, log)
	if err := s.rebuild(st, time.Now()); err != nil {
		return err
	}
	svc.streams[s.name] = s
	return nil
}

// loadConsumer restores a consumer of a loaded stream from its state
// record (or, if it has none yet, positions it by its deliver policy).
func (svc *Service) loadConsumer(def consumerDef, state map[string][]byte) error {
	s := svc.streams[def.Stream]
	if s == nil {
		return errors.New("its stream is not defined")
	}
	c := newConsumer(s, def.Config, def.ID, def.Created)
	if err := s.addLoadedConsumer(c, state[consumerStateKey(def.ID)]); err != nil {
		return err
	}
	// fillSubjects reads the log and takes the stream's lock itself.
	c.fillSubjects()
	return nil
}

// addLoadedConsumer positions a consumer from its state record (nil: by
// its deliver policy) and adds it to the stream.
func (s *stream) addLoadedConsumer(c *consumer, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state != nil {
		var st consumerState
		if err := json.Unmarshal(state, &st); err != nil {
			return fmt.Errorf("its state record: %w", err)
		}
		c.restoreLocked(st)
	} else if err := c.startLocked(); err != nil {
		return err
	}
	s.consumers[c.name] = c
	return nil
}

// offlineStream is a defined stream that could not be loaded (its log is
// damaged or missing): requests for it get "stream is offline" with the
// reason, and deleting it removes its definitions, as nats-server does
// with a stream it cannot recover. Its subjects stay taken.
type offlineStream struct {
	def       streamDef
	err       error
	consumers []consumerDef
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
	svc.mu.Unlock()
	if started {
		close(svc.stop)
		svc.wg.Wait()
	}
	// A create under way finishes first, so that the consumer it starts
	// is among those halted here; later ones are not started.
	svc.adminMu.Lock()
	defer svc.adminMu.Unlock()
	for _, s := range svc.allStreams() {
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
	if o := svc.offline[name]; o != nil {
		return nil, ErrStreamOffline(o.err)
	}
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
	if svc.streams[name] == nil && svc.offline[name] == nil {
		return "", false
	}
	return "JetStream stream '" + name + "'", true
}

// StreamNames returns the names of the streams whose subjects overlap
// subject (all when it is empty), offline ones included, sorted.
func (svc *Service) StreamNames(subject string) []string {
	svc.mu.RLock()
	loaded := slices.Collect(maps.Values(svc.streams))
	subjectsOf := map[string][]string{}
	for name, o := range svc.offline {
		subjectsOf[name] = o.def.Config.Subjects
	}
	svc.mu.RUnlock()
	for _, s := range loaded {
		subjectsOf[s.name] = s.config().Subjects
	}
	var names []string
	for name, subjects := range subjectsOf {
		if subject == "" || slices.ContainsFunc(subjects, func(p string) bool { return subjectsCollide(p, subject) }) {
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
