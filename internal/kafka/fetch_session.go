package kafka

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Incremental fetch sessions (KIP-227).
//
// A consumer opens a session with SessionID 0 and epoch 0 and gets an ID
// back; afterwards it sends only the partitions whose fetch position changed
// (plus ForgottenTopics), with the epoch incremented each time, and the
// broker answers only partitions with news: records, a changed high
// watermark, last stable offset or log start offset, or an error.
//
// Sessions live broker-wide (a client may reconnect and go on), bounded by
// max.incremental.fetch.session.cache.slots. When the cache is full, a new
// session takes the slot of the least recently used one only if that one
// has been idle for min.incremental.fetch.session.eviction.ms; otherwise the
// client gets SessionID 0 and keeps doing full fetches, as Kafka does.

const (
	defaultFetchSessionSlots = 1000            // max.incremental.fetch.session.cache.slots
	defaultFetchSessionIdle  = 2 * time.Minute // min.incremental.fetch.session.eviction.ms
)

// sessionKey names a partition in a session: by topic name (Fetch < v13)
// or by topic ID (v13+), never both.
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// fetchPosition is what a fetch asks of one partition.
type fetchPosition struct {
	key         sessionKey
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32
}

// sessionPartition is a partition tracked by a session.
type sessionPartition struct {
	fetchPosition
	// What the client was last told; an incremental response leaves the
	// partition out while none of them changes. -1 until first sent, so
	// a newly added partition is always answered.
	sentHighWatermark, sentLastStable, sentLogStart int64
}

// fetchSession is one client's incremental fetch session. Its mutex is
// held for the whole of a fetch on it: a client sends one fetch at a time
// per session, and a second one waits and then fails the epoch check.
type fetchSession struct {
	id         int32
	usesIDs    bool // created by Fetch v13+: partitions are keyed by topic ID
	mu         sync.Mutex
	epoch      int32 // the epoch the next request must carry
	partitions []*sessionPartition
	byKey      map[sessionKey]*sessionPartition
	lastUsed   time.Time // guarded by fetchSessions.mu
}

// fetchSessions is the broker-wide session cache.
type fetchSessions struct {
	mu    sync.Mutex
	byID  map[int32]*fetchSession
	slots int
	idle  time.Duration
	now   func() time.Time
}

func newFetchSessions(slots int, idle time.Duration) *fetchSessions {
	return &fetchSessions{byID: make(map[int32]*fetchSession), slots: slots, idle: idle, now: time.Now}
}

// create starts a session with the given partitions and returns it locked,
// or nil when no slot is free.
func (fs *fetchSessions) create(positions []fetchPosition, usesIDs bool) *fetchSession {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := fs.now()
	if len(fs.byID) >= fs.slots && !fs.evictIdleLocked(now) {
		return nil
	}
	sess := &fetchSession{
		id:       fs.newIDLocked(),
		usesIDs:  usesIDs,
		epoch:    1,
		byKey:    make(map[sessionKey]*sessionPartition, len(positions)),
		lastUsed: now,
	}
	for _, pos := range positions {
		sess.upsert(pos)
	}
	sess.mu.Lock()
	fs.byID[sess.id] = sess
	return sess
}

// lookup returns the session with id, locked, or nil.
func (fs *fetchSessions) lookup(id int32) *fetchSession {
	fs.mu.Lock()
	sess := fs.byID[id]
	if sess != nil {
		sess.lastUsed = fs.now()
	}
	fs.mu.Unlock()
	if sess != nil {
		sess.mu.Lock()
	}
	return sess
}

// remove closes the session with id, if it exists.
func (fs *fetchSessions) remove(id int32) {
	fs.mu.Lock()
	delete(fs.byID, id)
	fs.mu.Unlock()
}

// evictIdleLocked drops the least recently used session if it has been
// idle long enough, reporting whether a slot was freed.
func (fs *fetchSessions) evictIdleLocked(now time.Time) bool {
	var oldest *fetchSession
	for _, s := range fs.byID {
		if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
			oldest = s
		}
	}
	if oldest == nil || now.Sub(oldest.lastUsed) < fs.idle {
		return false
	}
	delete(fs.byID, oldest.id)
	return true
}

// newIDLocked picks an unused positive session ID; 0 means "no session".
func (fs *fetchSessions) newIDLocked() int32 {
	for {
		id := rand.Int32N(math.MaxInt32) + 1
		if _, taken := fs.byID[id]; !taken {
			return id
		}
	}
}

// upsert adds a partition to the session or updates its fetch position.
func (sess *fetchSession) upsert(pos fetchPosition) {
	if sp, ok := sess.byKey[pos.key]; ok {
		sp.fetchPosition = pos
		return
	}
	sp := &sessionPartition{fetchPosition: pos, sentHighWatermark: -1, sentLastStable: -1, sentLogStart: -1}
	sess.partitions = append(sess.partitions, sp)
	sess.byKey[pos.key] = sp
}

// forget removes a partition from the session.
func (sess *fetchSession) forget(key sessionKey) {
	if _, ok := sess.byKey[key]; !ok {
		return
	}
	delete(sess.byKey, key)
	for i, sp := range sess.partitions {
		if sp.key == key {
			sess.partitions = append(sess.partitions[:i], sess.partitions[i+1:]...)
			break
		}
	}
}

// moveToEnd moves the given partitions (those that just returned records)
// to the end of the session's order, in their current relative order, so
// that under MaxBytes every partition gets its turn to be first, as Kafka
// rotates them.
func (sess *fetchSession) moveToEnd(moved map[*sessionPartition]bool) {
	if len(moved) == 0 {
		return
	}
	kept := sess.partitions[:0:0]
	var tail []*sessionPartition
	for _, sp := range sess.partitions {
		if moved[sp] {
			tail = append(tail, sp)
		} else {
			kept = append(kept, sp)
		}
	}
	sess.partitions = append(kept, tail...)
}

// nextEpoch is the epoch after e, wrapping to 1 (0 starts a session).
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
