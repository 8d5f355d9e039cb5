// Package rate derives per-second rates from counters and gauges at the
// moment they are read, for the management API's `*_details.rate` fields.
// Nothing samples in the background: a Sampler keeps the values of an
// earlier read and compares each new read with them, so an object that is
// never looked at costs nothing but its counters.
package rate

import (
	"sync"
	"time"
)

// Window is the shortest span a rate is measured over. Reads closer
// together than this compare with the same earlier reading, so a burst of
// reads does not turn the rate into noise; reads further apart measure
// over the whole time between them.
const Window = time.Second

// Stat is one value with its rate of change per second, as RabbitMQ's
// API shows it: "publish": 10, "publish_details": {"rate": 2.0}. Value is
// a counter (it only grows) or a gauge (a queue's length).
type Stat struct {
	Name  string
	Value int64
	Rate  float64
}

// Sampler turns successive reads of the same set of values into rates.
// The zero value is ready: the first read has no earlier one to compare
// with and reports rates of 0. Safe for concurrent use.
type Sampler struct {
	mu         sync.Mutex
	prev, last reading
}

type reading struct {
	at     time.Time // zero: no reading
	values []int64
}

// Sample sets the Rate of each stat from its Value, read at now: the
// change since the reading that is at least Window older, per second.
// Every call must pass the same stats in the same order.
func (s *Sampler) Sample(now time.Time, stats []Stat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.at.IsZero() || now.Sub(s.last.at) >= Window {
		values := make([]int64, len(stats))
		for i, st := range stats {
			values[i] = st.Value
		}
		s.prev, s.last = s.last, reading{at: now, values: values}
	}
	span := now.Sub(s.prev.at).Seconds()
	for i := range stats {
		stats[i].Rate = 0
		if !s.prev.at.IsZero() && span > 0 && i < len(s.prev.values) {
			stats[i].Rate = float64(stats[i].Value-s.prev.values[i]) / span
		}
	}
}
