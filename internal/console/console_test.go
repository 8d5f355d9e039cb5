package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServesEmbeddedPages checks that the page and its scripts come from
// the binary with a policy that lets them load nothing from elsewhere,
// and that the handler only reads.
func TestServesEmbeddedPages(t *testing.T) {
	h := Handler()
	for path, want := range map[string]string{"/": `<script type="module" src="app.js">`, "/app.js": "import", "/console.css": "--accent"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("GET %s: %d, body lacks %q", path, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Fatalf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/nothing.js", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("GET /nothing.js: %d", rec.Code)
	}
}
