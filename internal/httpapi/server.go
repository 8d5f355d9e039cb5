// Package httpapi is Wharf's HTTP management API: the subset of RabbitMQ's
// management plugin API (JSON over HTTP, basic auth) that tools and
// `wharf policies` use — overview, vhosts, queues, exchanges, bindings
// and policies. It holds no state of its own: every answer comes from the
// mq registry.
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
)

// Config configures the API.
type Config struct {
	// Users maps user names to passwords, as the AMQP listener's
	// (amqp.Config.Users). nil: only guest/guest.
	Users map[string]string
	// LoopbackUsers may only log in from a loopback address. nil: guest.
	LoopbackUsers []string
	// ClusterName is reported by /api/overview. Default "wharf".
	ClusterName string
	// Version is the product version reported by /api/overview.
	Version string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Server serves the management API for one registry.
type Server struct {
	reg      *mq.Registry
	cfg      Config
	loopback map[string]bool
	table    []route
	http     *http.Server
}

// New returns a Server for reg; it is an http.Handler, and Serve runs it
// on a listener.
func New(reg *mq.Registry, cfg Config) *Server {
	if cfg.Users == nil {
		cfg.Users = map[string]string{"guest": "guest"}
	}
	if cfg.LoopbackUsers == nil {
		cfg.LoopbackUsers = []string{"guest"}
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "wharf"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{reg: reg, cfg: cfg, loopback: make(map[string]bool)}
	for _, u := range cfg.LoopbackUsers {
		s.loopback[u] = true
	}
	s.table = s.routes()
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s
}

// route is one endpoint: a method on /api/<collection> with as many
// path segments after it (vhost, name) as the handler reads.
type route struct {
	method     string
	collection string
	segments   int
	handle     http.HandlerFunc
}

// routes lists every endpoint.
func (s *Server) routes() []route {
	return []route{
		{"GET", "overview", 0, s.overview},
		{"GET", "vhosts", 0, s.listVHosts},
		{"GET", "vhosts", 1, s.getVHost},
		{"GET", "queues", 0, s.listQueues},
		{"GET", "queues", 1, s.listQueues},
		{"GET", "queues", 2, s.getQueue},
		{"GET", "exchanges", 0, s.listExchanges},
		{"GET", "exchanges", 1, s.listExchanges},
		{"GET", "exchanges", 2, s.getExchange},
		{"GET", "bindings", 0, s.listBindings},
		{"GET", "bindings", 1, s.listBindings},
		{"GET", "policies", 0, s.listPolicies},
		{"GET", "policies", 1, s.listPolicies},
		{"GET", "policies", 2, s.getPolicy},
		{"PUT", "policies", 2, s.putPolicy},
		{"DELETE", "policies", 2, s.deletePolicy},
	}
}

// dispatch finds the endpoint of a request. Segments are split on the
// escaped path and unescaped one by one, so the default vhost is the
// single segment "%2F", as in RabbitMQ (http.ServeMux would clean the
// resulting "//" away). The segments become the path values "vhost" and
// "name".
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/")
	if !ok {
		writeNotFound(w)
		return
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			writeNotFound(w)
			return
		}
		parts[i] = u
	}
	methodKnown := false
	for _, rt := range s.table {
		if rt.collection != parts[0] || rt.segments != len(parts)-1 {
			continue
		}
		if rt.method != r.Method {
			methodKnown = true
			continue
		}
		for i, key := range []string{"vhost", "name"}[:rt.segments] {
			r.SetPathValue(key, parts[i+1])
		}
		rt.handle(w, r)
		return
	}
	if methodKnown {
		writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed", r.Method+" is not allowed here")
		return
	}
	writeNotFound(w)
}

// ServeHTTP authenticates the request, then routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		writeUnauthorized(w, "Not_Authorized")
		return
	}
	want, known := s.cfg.Users[user]
	if !known || subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 {
		writeUnauthorized(w, "Login failed")
		return
	}
	if s.loopback[user] && !fromLoopback(r.RemoteAddr) {
		writeUnauthorized(w, "User can only log in via localhost")
		return
	}
	s.dispatch(w, r)
}

// fromLoopback reports whether a request's remote address is a loopback
// one (httptest's "pipe" addresses count as local).
func fromLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return true
	}
	ip := net.ParseIP(host)
	return ip == nil || ip.IsLoopback()
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
