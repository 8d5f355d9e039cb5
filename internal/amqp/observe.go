package amqp

import (
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// MethodObserver sees every method a client sends on a channel and how
// long the server took to handle it, for the method latency metrics. It
// runs on the connection's reader, so it must be quick.
type MethodObserver func(method amqpwire.MethodID, elapsed time.Duration)

// methodObserver is the Server's MethodObserver, or nil.
type methodObserver struct {
	fn atomic.Pointer[MethodObserver]
}

// ObserveMethods installs fn (nil removes it). It may be called while the
// server runs.
func (s *Server) ObserveMethods(fn MethodObserver) {
	if fn == nil {
		s.observer.fn.Store(nil)
		return
	}
	s.observer.fn.Store(&fn)
}

// observe reports a method handled since started.
func (s *Server) observe(m amqpwire.Method, started time.Time) {
	if fn := s.observer.fn.Load(); fn != nil {
		(*fn)(m.ID(), time.Since(started))
	}
}
