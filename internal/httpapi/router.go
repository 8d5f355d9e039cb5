package httpapi

import (
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// route is one endpoint: a method on a path below /api/, as segments; a
// segment in braces ("{vhost}") matches any one segment and becomes that
// path value.
type route struct {
	method   string
	segments []string
	rule     rule // who may call it (authz.go)
	handle   http.HandlerFunc
}

// Route adds an endpoint below /api/ that any management user may call,
// such as Route("GET", "kafka/topics/{topic}", h): the request is
// authenticated first, a write must carry JSON, and the braced segments
// are h's path values (r.PathValue("vhost")), unescaped one by one so
// that "%2F" is the vhost "/". A path that matches no route is 404; one
// whose route takes other methods is 405. Call before Serve.
func (s *Server) Route(method, pattern string, handle http.HandlerFunc) {
	s.route(method, pattern, anyManager, handle)
}

// route adds an endpoint that users may call as need says.
func (s *Server) route(method, pattern string, need rule, handle http.HandlerFunc) {
	s.table = append(s.table, route{method: method, segments: strings.Split(pattern, "/"), rule: need, handle: handle})
}

// match reports whether the path's segments fit the route. A wildcard
// takes any segment but an empty one: PUT /api/queues/%2F// must not
// declare a server-named queue.
func (rt *route) match(parts []string) bool {
	if len(parts) != len(rt.segments) {
		return false
	}
	for i, seg := range rt.segments {
		if isWildcard(seg) && parts[i] == "" || !isWildcard(seg) && seg != parts[i] {
			return false
		}
	}
	return true
}

func isWildcard(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

// dispatch finds the endpoint of a request. Segments are split on the
// escaped path and unescaped one by one, so the default vhost is the
// single segment "%2F", as in RabbitMQ (http.ServeMux would clean the
// resulting "//" away). A trailing slash is ignored.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.EscapedPath(), "/api/")
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
	for i := range s.table {
		rt := &s.table[i]
		if !rt.match(parts) {
			continue
		}
		if rt.method != r.Method {
			methodKnown = true
			continue
		}
		for j, seg := range rt.segments {
			if isWildcard(seg) {
				r.SetPathValue(seg[1:len(seg)-1], parts[j])
			}
		}
		if !s.authorize(w, r, rt.rule) {
			return
		}
		if hasBody(r.Method) && !isJSON(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
				"Content-Type must be application/json, got "+strconv.Quote(r.Header.Get("Content-Type")))
			return
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
