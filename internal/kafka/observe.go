package kafka

import (
	"sync/atomic"
	"time"
)

// RequestObserver sees every request answered: its API key and the time
// from its arrival to its response being written (Kafka's request
// TotalTimeMs), for the request latency metrics. It runs on the
// connection's writer, so it must be quick.
type RequestObserver func(apiKey int16, elapsed time.Duration)

// requestObserver is the Server's RequestObserver, or nil.
type requestObserver struct {
	fn atomic.Pointer[RequestObserver]
}

// ObserveRequests installs fn (nil removes it). It may be called while the
// server runs.
func (s *Server) ObserveRequests(fn RequestObserver) {
	if fn == nil {
		s.observer.fn.Store(nil)
		return
	}
	s.observer.fn.Store(&fn)
}

// observe reports ex, a decoded request whose answer was written.
func (s *Server) observe(ex *exchange) {
	if fn := s.observer.fn.Load(); fn != nil && !ex.received.IsZero() {
		(*fn)(ex.apiKey, time.Since(ex.received))
	}
}
