// Package httpapi is Wharf's HTTP management API, compatible with
// RabbitMQ's management plugin (JSON shapes, field names, status codes,
// "%2F" for the vhost "/"), so that rabbitmqadmin, client test suites and
// `wharf queues|exchanges|bindings|connections|definitions|policies` work
// against it. It translates requests into calls on the mq registry and
// reads connections from the AMQP front end (AMQPFrontEnd); it holds no
// state of its own but the samples its rates are computed from.
//
// Endpoints live below /api/ (routes.go lists them): RabbitMQ's, plus
// Wharf's own moving of dead letters back (replay.go) and, once
// ServeKafka is called, Kafka's topics, records and groups below
// /api/kafka/ (kafka.go, translated to internal/kafkaview). Other packages
// add theirs with Route (authenticated, below /api/) or Mount (any other
// path, such as /metrics or the console at /). Access is basic auth
// against the node's user store, with RabbitMQ's rules (authz.go): only
// users tagged administrator, monitoring, policymaker or management get
// in, each tag opening what it opens in RabbitMQ, and a change to a queue,
// exchange or binding needs the same permissions as over AMQP
// (internal/access). A loopback-only user (guest) must connect from a
// loopback address and name this machine in Host (host.go); a write needs
// Content-Type application/json.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqp"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/rate"
	"github.com/wharf-mq/wharf/internal/users"
	"github.com/wharf-mq/wharf/internal/version"
)

// Config configures the API.
type Config struct {
	// Users is the user store basic auth checks, and the users the API
	// manages. Required.
	Users *users.Store
	// Access holds the users' permissions, which the API checks and
	// manages. Required.
	Access *access.Store
	// Limiter slows down repeated failed logins from one address; nil:
	// no limit.
	Limiter users.LoginLimiter
	// LoopbackUsers may only log in from a loopback address. nil: guest.
	LoopbackUsers []string
	// AMQP is the AMQP front end whose connections the API lists and
	// closes, and whose alarms it reports; nil when the node has no AMQP
	// listener (the lists are then empty).
	AMQP AMQPFrontEnd
	// Listeners are the node's listeners, for /api/overview.
	Listeners []Listener
	// ClusterName is reported by /api/overview. Default "wharf".
	ClusterName string
	// NodeName is the node's name in every object that names one.
	// Default "wharf@" and the machine's host name, like RabbitMQ's
	// "rabbit@host"; in a cluster "wharf@" and the node id, as every
	// node names the others (mq.NodeName).
	NodeName string
	// Version is the product version reported by /api/overview.
	// Default: this build's (internal/version).
	Version string
	// IdleTimeout closes a keep-alive connection that sends no request
	// for this long. Default 60 s, Cowboy's idle_timeout (what RabbitMQ's
	// API runs on): without it every idle client would hold a descriptor
	// for good.
	IdleTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// AMQPFrontEnd is what the API reads from and asks of the AMQP front end;
// *amqp.Server implements it.
type AMQPFrontEnd interface {
	ConnectionDetails() []mq.ConnectionDetail
	ConsumerDetails() []mq.ConsumerDetail
	CloseConnection(name, reason string) bool
	CloseVHostConnections(vhost, reason string)
	CloseUserConnections(user, reason string)
	MessageStats() []rate.Stat
	Resources() amqp.Resources
}

// Listener is one of the node's listeners: protocol is RabbitMQ's name
// ("amqp", "http") or "kafka".
type Listener struct {
	Protocol string
	Addr     net.Addr
}

// defaultIdleTimeout is Config.IdleTimeout's default.
const defaultIdleTimeout = 60 * time.Second

// Server serves the management API for one registry.
type Server struct {
	reg      *mq.Registry
	amqp     AMQPFrontEnd
	cfg      Config
	loopback map[string]bool
	hostname string // the machine's name, a local Host for loopback-only users
	started  time.Time
	table    []route
	api      http.Handler   // /api/: authenticated, then routed by table
	mux      *http.ServeMux // whatever Mount adds
	http     *http.Server
	// lookupWait is lookupWait; tests shorten it.
	lookupWait time.Duration

	// queueTotals samples the node's queue depths for /api/overview.
	queueTotals rate.Sampler
}

// New returns a Server for reg; it is an http.Handler, and Serve runs it
// on a listener. cfg.Users and cfg.Access are required.
func New(reg *mq.Registry, cfg Config) *Server {
	if cfg.Users == nil || cfg.Access == nil {
		panic("httpapi: New needs Config.Users and Config.Access")
	}
	if cfg.LoopbackUsers == nil {
		cfg.LoopbackUsers = []string{"guest"}
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "wharf"
	}
	if cfg.NodeName == "" && reg.NodeID() > 0 {
		cfg.NodeName = mq.NodeName(reg.NodeID()) // as queues name their cluster nodes
	}
	if cfg.NodeName == "" {
		host, _ := os.Hostname()
		cfg.NodeName = "wharf@" + strings.Split(host, ".")[0]
	}
	if cfg.Version == "" {
		cfg.Version = version.String()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{reg: reg, amqp: cfg.AMQP, cfg: cfg, loopback: make(map[string]bool), hostname: machineName(),
		started: time.Now(), mux: http.NewServeMux(), lookupWait: lookupWait}
	if s.amqp == nil {
		s.amqp = noAMQP{reg}
	}
	for _, u := range cfg.LoopbackUsers {
		s.loopback[u] = true
	}
	s.routes()
	s.api = s.Authenticated(http.HandlerFunc(s.dispatch))
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s
}

// Identity is the cluster and node names the API reports.
func (s *Server) Identity() (cluster, node string) { return s.cfg.ClusterName, s.cfg.NodeName }

// Version is the product version the API reports.
func (s *Server) Version() string { return s.cfg.Version }

// Mount serves h for pattern (http.ServeMux syntax) outside /api/, e.g.
// "/metrics" or "/" for a web console. h does its own authentication,
// with Authenticated if it wants the API's. Call before Serve.
func (s *Server) Mount(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP serves the API and what was mounted beside it. The API does
// its own routing: http.ServeMux would clean the "//" an escaped vhost
// "/" ("%2F") unescapes to, and redirect.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.EscapedPath(), "/api/") {
		s.api.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// userKey is the context key of the authenticated user.
type userKey struct{}

// requester returns the user a request was authenticated as.
func requester(r *http.Request) users.User {
	u, _ := r.Context().Value(userKey{}).(users.User)
	return u
}

// userOf returns the name of the user a request was authenticated as.
func userOf(r *http.Request) string { return requester(r).Name }

// Authenticated wraps h with the API's basic auth: 401 without valid
// credentials (and for a loopback-only user from elsewhere, or a user
// without a management tag), 403 for a loopback-only user whose Host
// does not name this machine.
func (s *Server) Authenticated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok {
			writeUnauthorized(w, "Not_Authorized")
			return
		}
		u, ok, err := s.cfg.Users.LoginWithin(r.Context(), s.lookupWait, s.cfg.Limiter, r.RemoteAddr, user, pass)
		if err != nil {
			return // the client left while its login waited its turn
		}
		if !ok {
			s.cfg.Logger.Warn("HTTP access denied: invalid credentials", "user", user, "remote", r.RemoteAddr)
			writeUnauthorized(w, "Login failed")
			return
		}
		if s.loopback[user] {
			if !netserve.FromLoopback(r.RemoteAddr) {
				writeUnauthorized(w, "User can only log in via localhost")
				return
			}
			if !s.localHost(r.Host) {
				writeError(w, http.StatusForbidden, "forbidden",
					fmt.Sprintf("Host %q does not name this machine; user %s can only log in via localhost", r.Host, user))
				return
			}
		}
		if !isManagementUser(u) {
			writeNotAuthorised(w, "Not management user")
			return
		}
		h.ServeHTTP(w, r.WithContext(withCatchUp(context.WithValue(r.Context(), userKey{}, u))))
	})
}

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, and waits (until ctx ends) for requests in
// flight.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// noAMQP stands for a node without an AMQP listener: no connections, no
// message totals, no alarms.
type noAMQP struct{ reg *mq.Registry }

func (noAMQP) ConnectionDetails() []mq.ConnectionDetail { return nil }
func (noAMQP) ConsumerDetails() []mq.ConsumerDetail     { return nil }
func (noAMQP) CloseConnection(string, string) bool      { return false }
func (noAMQP) CloseVHostConnections(string, string)     {}
func (noAMQP) CloseUserConnections(string, string)      {}
func (noAMQP) MessageStats() []rate.Stat                { return nil }
func (n noAMQP) Resources() amqp.Resources {
	return amqp.Resources{MemoryUsed: n.reg.MemoryUsed(), DiskFree: -1}
}
