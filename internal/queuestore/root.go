package queuestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// A store's directory, <Root>/<id>/, holds:
const (
	MessagesLog   = "messages"       // a log: one record per persistent message
	SettlementLog = "settled"        // a log: records naming settled message offsets
	cleanFile     = "clean-shutdown" // written by close: the delivered watermark
)

// straySuffix ends the name of a store directory moved aside by
// SetAsideStrays; no store ID ends with it.
const straySuffix = "-stray"

// Config configures a Root. The queueing core sets every field (its
// mq.Config carries the defaults).
type Config struct {
	// Dir holds one directory per durable queue; created if missing.
	Dir string
	// SegmentBytes is the segment size of both logs of a store.
	SegmentBytes int64
	// HousekeepingInterval is how often settlements are written and
	// settled segments reclaimed (housekeeper.go).
	HousekeepingInterval time.Duration
	// ScrubInterval and ScrubBytesPerSecond say how often and how fast
	// every store's logs are read back and verified (scrub.go): 0 scrubs
	// once after Start, only what recovery did not verify; negative
	// never. A negative rate means no cap.
	ScrubInterval       time.Duration
	ScrubBytesPerSecond int64
	Logger              *slog.Logger
}

// Root is the directory of every durable queue's store and the background
// work on the stores it has open: the housekeeper (settlements, reclaiming,
// compaction) and the scrubber.
type Root struct {
	cfg    Config
	seg    replica.Config // of every log, for creating them on first use
	logger *slog.Logger
	dir    *dirSync

	mu     sync.Mutex
	stores map[*Store]struct{} // open stores, for housekeeping, scrubbing and Close

	keeper *housekeeper // nil until Start
	scrub  *scrubber    // nil until Start
}

// OpenRoot opens the stores' directory, creating it if it is missing. No
// goroutine runs until Start.
func OpenRoot(cfg Config) (*Root, error) {
	dir, err := openDirSync(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("queuestore: %w", err)
	}
	// No time- or size-based retention: messages go when they are settled.
	seg := replica.DefaultConfig()
	seg.SegmentBytes = cfg.SegmentBytes
	seg.RetentionMs = -1
	seg.RetentionBytes = -1
	return &Root{cfg: cfg, seg: seg, logger: cfg.Logger, dir: dir, stores: make(map[*Store]struct{})}, nil
}

// Start starts the housekeeper and the scrubber, once the stores known at
// start-up are open (the scrubber's first pass covers what their recovery
// did not verify).
func (r *Root) Start() {
	r.keeper = newHousekeeper(r, r.cfg.HousekeepingInterval)
	go r.keeper.run()
	r.scrub = r.startScrubber()
}

// Close stops the background work, then writes pending settlements and
// closes every open store, a few at a time.
func (r *Root) Close() error {
	r.stopBackground()
	return r.closeStores()
}

// Abandon stops the background work and leaves every open store as a
// killed process would: its files unclosed, nothing more written to them.
// For tests of crash recovery, which open a new Root on the same
// directory.
func (r *Root) Abandon() {
	r.stopBackground()
	for _, s := range r.openStores() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}
}

func (r *Root) stopBackground() {
	if r.scrub != nil {
		r.scrub.stop()
	}
	if r.keeper != nil {
		r.keeper.shutdown()
	}
}

// openLog opens (creating if missing) one of a store's logs. Nothing
// flushes them in the background: publisher confirms sync them (Store.Sync
// through a replica.Syncer), the housekeeper the settlements.
func (r *Root) openLog(dir string, logger *slog.Logger) (*replica.Local, error) {
	return replica.Open(dir, r.seg, replica.Options{Logger: logger})
}

// HousekeepSoon asks for a housekeeping pass before the next tick. It
// never blocks.
func (r *Root) HousekeepSoon() {
	if r.keeper != nil {
		r.keeper.soon()
	}
}

// storeClosers is how many stores close at once. Each close costs a few
// fsyncs (the logs' markers, the clean marker); one after another, 2,000
// queues on a busy disk took longer than a supervisor's stop timeout. The
// broker closes partitions eight at a time for the same reason.
const storeClosers = 8

func (r *Root) closeStores() error {
	stores := r.openStores()
	errs := make([]error, len(stores))
	slots := make(chan struct{}, storeClosers)
	var wg sync.WaitGroup
	for i, s := range stores {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := s.close(); err != nil {
				errs[i] = fmt.Errorf("close queue %q: %w", s.queue, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Owner is the queue a store belongs to.
type Owner struct {
	// Lock is the queue's lock. It also guards the store's state of the
	// queue's messages (held-back records, pending settlements), so
	// methods named ...Locked are called with it held, and the store
	// takes it for its own work on that state.
	Lock *sync.Mutex
	// Name and VHost name the queue in log lines and errors.
	Name, VHost string
	// Crash takes the queue out of service when the scrubber finds its
	// logs damaged; it is called with no lock held, and calls
	// Store.CloseWithoutMarker.
	Crash func(cause error)
}

func (r *Root) newStore(id string, o Owner) *Store {
	return &Store{
		root:      r,
		dir:       filepath.Join(r.dir.path, id),
		queue:     o.Name,
		logger:    r.logger.With("queue", o.Name, "vhost", o.VHost),
		qmu:       o.Lock,
		crash:     o.Crash,
		win:       newSettleWindow(0),
		delivered: -1,
		counts:    make(map[int64]uint32),
		recovered: recovered{clean: true, delivered: -1},
	}
}

// Create returns the store of a new durable queue. It touches no file:
// the logs are created when first needed.
func (r *Root) Create(id string, o Owner) *Store {
	s := r.newStore(id, o)
	r.add(s)
	return s
}

// Open opens the store of a durable queue defined before this start and
// rebuilds its settlement state; Unsettled then lists the messages to
// recover. A queue that never logged a message has no messages log: it
// is empty, and whatever an interrupted creation left in its directory is
// removed. On error the store returned is closed, keeps the queue's files
// and can still Delete them.
func (r *Root) Open(id string, o Owner) (*Store, error) {
	s := r.newStore(id, o)
	if err := s.open(); err != nil {
		s.closed, s.ended = true, true
		return s, err
	}
	r.add(s)
	return s, nil
}

func (r *Root) add(s *Store) {
	r.mu.Lock()
	r.stores[s] = struct{}{}
	r.mu.Unlock()
}

func (r *Root) remove(s *Store) {
	r.mu.Lock()
	delete(r.stores, s)
	r.mu.Unlock()
}

func (r *Root) openStores() []*Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Store, 0, len(r.stores))
	for s := range r.stores {
		out = append(out, s)
	}
	return out
}

// SetAsideStrays moves store directories whose ID is not in live out of
// the way, renamed <id>.<unix ms>-stray, and never deletes them: a
// definition store that lost its tail (a damaged or truncated metadata
// log) must not cost the data too. Kafka does the same with partition
// directories it has no metadata for. Such a directory is also what a
// crash between deleting a queue's definition and its files leaves; an
// operator removes it once satisfied it is not needed. Directories set
// aside before are only counted in the log.
func (r *Root) SetAsideStrays(live map[string]bool) {
	root := r.dir.path
	entries, err := os.ReadDir(root)
	if err != nil {
		r.logger.Error("queuestore: cannot list queue data", "dir", root, "err", err)
		return
	}
	moved, earlier := 0, 0
	for _, e := range entries {
		switch {
		case !e.IsDir() || live[e.Name()]:
		case strings.HasSuffix(e.Name(), straySuffix):
			earlier++
		default:
			from := filepath.Join(root, e.Name())
			to := fmt.Sprintf("%s.%d%s", from, time.Now().UnixMilli(), straySuffix)
			if err := os.Rename(from, to); err != nil {
				r.logger.Error("queuestore: cannot set aside queue data without a queue definition", "dir", from, "err", err)
				continue
			}
			moved++
			r.logger.Error("queuestore: queue data without a queue definition set aside, not deleted "+
				"(were the definitions lost?); remove it once it is known not to be needed",
				"dir", from, "moved_to", to)
		}
	}
	if moved > 0 {
		if err := syncDir(root); err != nil {
			r.logger.Error("queuestore: sync queue data directory", "dir", root, "err", err)
		}
	}
	if earlier > 0 {
		r.logger.Warn("queuestore: queue data set aside at an earlier start is still there", "dirs", earlier, "in", root)
	}
}

// Stored counts the stores in dir that hold data, leaving out those set
// aside. The node asks at start-up: queue logs with no metadata log to
// define their queues mean the definitions were lost, not that the queues
// are gone.
func Stored(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	n := 0
	for _, e := range entries {
		// Data already set aside defines no queue of its own.
		if e.IsDir() && !strings.HasSuffix(e.Name(), straySuffix) {
			n++
		}
	}
	return n, err
}
