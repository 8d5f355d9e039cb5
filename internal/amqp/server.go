package amqp

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/netserve"
)

// connIDs numbers connections process-wide, so two Servers over one
// registry never hand out the same mq.ConnID. 0 means "no connection".
var connIDs atomic.Uint64

// Server serves AMQP 0-9-1 for one mq.Registry. Create it with NewServer,
// run Serve on one or more listeners and stop it with Shutdown.
type Server struct {
	reg    *mq.Registry
	cfg    Config
	log    *slog.Logger
	auth   *authenticator
	alarms *alarms
	stats  serverStats // message counters of closed channels (stats.go)

	// netsrv accepts, tracks and shuts down the connections, and owns
	// the alarm monitor's goroutine.
	netsrv *netserve.Server[*conn]
	done   <-chan struct{} // closed when Shutdown starts
	// stopped ends waits inside handshakes (a login waiting its turn
	// after failed ones) when Shutdown starts.
	stopped context.Context
	stop    context.CancelFunc
	monitor sync.Once // starts the alarm monitor with the first Serve

	observer methodObserver // times methods for metrics (observe.go)
}

// NewServer returns a Server answering for reg. cfg.Users and cfg.Access
// are required.
func NewServer(reg *mq.Registry, cfg Config) *Server {
	if cfg.Users == nil || cfg.Access == nil {
		panic("amqp: NewServer needs Config.Users and Config.Access")
	}
	cfg = cfg.withDefaults()
	s := &Server{
		reg:  reg,
		cfg:  cfg,
		log:  cfg.Logger.With("component", "amqp"),
		auth: newAuthenticator(cfg),
	}
	s.netsrv = netserve.New(s.log, netserve.Hooks[*conn]{
		NewConn: func(nc net.Conn) *conn { return newConn(s, nc) },
		Serve:   (*conn).serve,
		Stop:    func(c *conn) { c.forceClose(shutdownReason) },
		Kill:    (*conn).kill,
	})
	s.done = s.netsrv.Done()
	s.stopped, s.stop = context.WithCancel(context.Background())
	s.alarms = newAlarms(s)
	return s
}

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutines. It returns nil after Shutdown and the accept error otherwise.
// Serve takes ownership of ln and closes it.
func (s *Server) Serve(ln net.Listener) error {
	s.monitor.Do(func() {
		s.netsrv.Go(func() { s.alarms.run(s.done) })
	})
	return s.netsrv.Serve(ln)
}

// eachConn calls fn for every live connection, without the server's lock
// held.
func (s *Server) eachConn(fn func(*conn)) { s.netsrv.Each(fn) }

// shutdownReason is what connection.close 320 tells clients on Shutdown.
const shutdownReason = "broker forced connection closure with reason 'shutdown'"

// Shutdown stops accepting connections and closes every connection the way
// RabbitMQ does when it stops: connection.close with 320 CONNECTION_FORCED,
// waiting for the client's close-ok. Unacknowledged deliveries go back to
// their queues. If ctx ends first the remaining sockets are closed at once
// and ctx's error is returned; either way every goroutine of the server has
// stopped when Shutdown returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	err := s.netsrv.Shutdown(ctx)
	if err != nil {
		s.netsrv.Wait() // with the sockets closed every goroutine ends promptly
	}
	return err
}
