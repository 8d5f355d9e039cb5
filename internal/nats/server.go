package nats

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// Server serves the Core NATS client protocol over one subject router.
// Create it with NewServer, run Serve on one or more listeners and stop it
// with Shutdown.
type Server struct {
	cfg    Config
	log    *slog.Logger
	router *subjects.Router
	id     string // INFO's server_id

	netsrv  *netserve.Server[*conn]
	clients atomic.Uint64 // last client id handed out
}

// NewServer returns a Server routing through router.
func NewServer(router *subjects.Router, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "nats"),
		router: router,
		id:     newServerID(),
	}
	s.netsrv = netserve.New(s.log, netserve.Hooks[*conn]{
		NewConn: func(nc net.Conn) *conn { return newConn(s, nc) },
		Serve:   (*conn).serve,
		// nats-server closes its clients on shutdown, after writing what
		// it had queued for them; they reconnect elsewhere or later.
		Stop: func(c *conn) { c.close(closeFlush) },
		Kill: func(c *conn) { c.nc.Close() },
	})
	return s, nil
}

// newServerID returns a random identifier shaped like nats-server's: 56
// upper-case letters and digits starting with 'N'.
func newServerID() string {
	return "N" + (rand.Text() + rand.Text() + rand.Text())[:55]
}

// MaxPayload is the largest message a client may publish (Config's, or
// its default).
func (s *Server) MaxPayload() int { return s.cfg.MaxPayload }

// Serve accepts connections on ln until Shutdown. It returns nil after
// Shutdown and the accept error otherwise. Serve takes ownership of ln.
func (s *Server) Serve(ln net.Listener) error { return s.netsrv.Serve(ln) }

// Shutdown stops accepting connections and closes every connection once
// what is queued for it is written. If ctx ends first the remaining
// sockets are closed at once and ctx's error is returned; either way no
// goroutine of the server is left when Shutdown returns.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.netsrv.Shutdown(ctx)
	if err != nil {
		s.netsrv.Wait()
	}
	return err
}

// info is the INFO sent to a client on the listener addr.
func (s *Server) info(local, remote net.Addr, clientID uint64) serverInfo {
	info := serverInfo{
		ServerID:     s.id,
		ServerName:   s.cfg.ServerName,
		Version:      compatVersion,
		Proto:        1,
		Go:           goVersion,
		Headers:      true,
		AuthRequired: s.cfg.authRequired(),
		MaxPayload:   s.cfg.MaxPayload,
		JetStream:    s.cfg.JetStream,
		ClientID:     clientID,
	}
	if a, ok := local.(*net.TCPAddr); ok {
		info.Host, info.Port = a.IP.String(), a.Port
	}
	if a, ok := remote.(*net.TCPAddr); ok {
		info.ClientIP = a.IP.String()
	}
	return info
}
