// Package console is Wharf's web console: plain HTML, CSS and JavaScript
// with no build step, embedded in the binary (no CDN: it works offline)
// and served at / beside the management API. The page itself needs no
// login; the script logs in to /api/ with basic auth, as the management
// API does, and draws everything from its JSON: RabbitMQ's endpoints for
// queues, exchanges, bindings, policies and connections, Wharf's
// /api/kafka/ for topics and consumer groups.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy lets the page load and call nothing but its own
// origin, and be framed by no other page.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Handler serves the console's files.
func Handler() http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		server.ServeHTTP(w, r)
	})
}
