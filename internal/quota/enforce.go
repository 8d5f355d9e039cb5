package quota

import (
	"sync"
	"time"
)

// Kafka's quota measuring: quota.window.num samples of
// quota.window.size.seconds each.
const (
	windows     = 11
	windowWidth = time.Second
	// maxSensors bounds the rates kept; past it, rates idle for the
	// whole measuring span are dropped (client ids are the client's to
	// choose, so their number is not ours to bound).
	maxSensors = 10000
)

// Record adds value to what the client (user is the principal's name,
// "ANONYMOUS" unauthenticated) did against key's quota at now, and
// returns how long the client must be throttled: 0 when it is within its
// quota or has none. request_percentage throttles at most one window, as
// Kafka bounds request quotas; byte rates are not bounded.
func (m *Manager) Record(key, user, clientID string, value float64, now time.Time) time.Duration {
	if !m.any.Load() {
		return 0
	}
	bound, tags, ok := m.limit(key, user, clientID)
	if !ok {
		return 0
	}
	rate, span := m.sensors.record(tags, value, now)
	if rate <= bound {
		return 0
	}
	var throttle time.Duration
	if bound <= 0 {
		throttle = span
	} else {
		throttle = time.Duration((rate - bound) / bound * float64(span))
	}
	if key == RequestPercentage {
		throttle = min(throttle, windowWidth)
	}
	return throttle.Round(time.Millisecond)
}

// RequestPercentage turns time spent on a client's request into what
// request_percentage measures: percent-seconds of one thread.
func RequestPercentageOf(d time.Duration) float64 { return d.Seconds() * 100 }

// sensorKey is what one rate is measured for: a quota key and the user
// and client id it is shared by ("" for all).
type sensorKey struct {
	key, user, clientID string
}

type sensors struct {
	mu   sync.Mutex
	byID map[sensorKey]*rate
}

func (s *sensors) init() { s.byID = map[sensorKey]*rate{} }

// record adds value to a sensor's rate and returns the rate per second
// and the span it is measured over.
func (s *sensors) record(k sensorKey, value float64, now time.Time) (float64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byID[k]
	if r == nil {
		if len(s.byID) >= maxSensors {
			s.dropIdle(now)
		}
		r = &rate{}
		s.byID[k] = r
	}
	r.add(value, now)
	return r.value(now)
}

// dropIdle forgets rates with nothing in their measuring span.
func (s *sensors) dropIdle(now time.Time) {
	for k, r := range s.byID {
		if r.idle(now) {
			delete(s.byID, k)
		}
	}
}

// rate is Kafka's Rate over SampledStat: the sum of the values recorded
// in the last windows, each window starting at its first record, divided
// by the time they cover, which counts as at least windows-1 whole
// windows so that a new client's first burst is averaged, not taken alone.
type rate struct {
	samples [windows]sample
	current int // index of the newest sample
	used    int // samples in use
}

type sample struct {
	start time.Time
	sum   float64
}

func (r *rate) add(value float64, now time.Time) {
	if r.used == 0 || !now.Before(r.samples[r.current].start.Add(windowWidth)) {
		r.current = (r.current + 1) % windows
		r.samples[r.current] = sample{start: now}
		r.used = min(r.used+1, windows)
	}
	r.samples[r.current].sum += value
}

// value is the rate per second and the span it covers.
func (r *rate) value(now time.Time) (float64, time.Duration) {
	expired := now.Add(-windows * windowWidth)
	var total float64
	oldest := now
	for i := range r.used {
		s := r.samples[(r.current-i+windows)%windows]
		if s.start.Before(expired) {
			continue
		}
		total += s.sum
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	span := now.Sub(oldest)
	if full := windowWidth * (windows - 1); span < full {
		// Kafka counts at least windows-1 whole windows, plus the part
		// of the current one elapsed.
		span = full + span%windowWidth
	}
	span = max(span, time.Millisecond)
	return total / span.Seconds(), span
}

func (r *rate) idle(now time.Time) bool {
	return r.used == 0 || now.Sub(r.samples[r.current].start) > windows*windowWidth
}
