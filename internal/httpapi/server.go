// Package httpapi is Wharf's HTTP management API: the subset of RabbitMQ's
// management plugin API (JSON over HTTP, basic auth) that tools and
// `wharf policies` use — overview, vhosts, queues, exchanges, bindings
// and policies. It holds no state of its own: every answer comes from the
// mq registry.
//
// Access is basic auth with the AMQP listener's users. A loopback-only
// user (guest) must connect from a loopback address and name this machine
// in Host (host.go); a write needs Content-Type application/json.
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/version"
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

// defaultIdleTimeout is Config.IdleTimeout's default.
const defaultIdleTimeout = 60 * time.Second

// Server serves the management API for one registry.
type Server struct {
	reg      *mq.Registry
	cfg      Config
	loopback map[string]bool
	hostname string // the machine's name, a local Host for loopback-only users
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
		cfg.Version = version.String()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{reg: reg, cfg: cfg, loopback: make(map[string]bool), hostname: machineName()}
	for _, u := range cfg.LoopbackUsers {
		s.loopback[u] = true
	}
	s.table = s.routes()
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
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
		if hasBody(r.Method) && !isJSON(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
				"Content-Type must be application/json, got "+strconv.Quote(r.Header.Get("Content-Type")))
			return
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

// hasBody reports whether requests of method carry a JSON body here.
func hasBody(method string) bool { return method == http.MethodPut || method == http.MethodPost }

// isJSON reports whether a Content-Type header announces JSON. Requiring
// it (RabbitMQ takes any) means a cross-site page cannot write through a
// visitor's browser without a CORS preflight, which this API never grants.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
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
	s.dispatch(w, r)
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
