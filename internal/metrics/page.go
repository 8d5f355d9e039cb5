package metrics

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// page serves one metrics endpoint: the registry's families (histograms,
// the Go and process collectors, the node-wide gauges) encoded by expfmt,
// then the families with one sample per object (topic, partition, group
// partition, queue) written directly by an exposition.
//
// The split is what keeps a scrape from moving produce latency on a
// broker with 10,000 partitions and 10,000 queues. Through the registry,
// each of their ~110,000 samples was a const metric sent over a channel
// from a collector goroutine, a dto.Metric checked and sorted, then text
// written by expfmt, and gzip at its default level: about 300 ms of CPU
// and 50 MB of garbage a scrape, on both of a 2-core machine's Ps at
// once. Written directly, a sample costs one append to a buffer that is
// reused, on the scraping goroutine alone, and the gzip level is
// BestSpeed (the page compresses almost as well: it is mostly repeated
// names).
type page struct {
	registry  *prometheus.Registry
	src       Sources
	perObject bool
}

// scratch is what one scrape reuses of the last: the output buffer and
// the samples read from the broker, the groups and the queues.
type scratch struct {
	out        []byte
	topics     []topicSample
	partitions []partitionSample
	groups     []groupSample
	offsets    []offsetSample
	queues     []queueSample
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) reset() {
	s.out = s.out[:0]
	s.topics, s.partitions = s.topics[:0], s.partitions[:0]
	s.groups, s.offsets = s.groups[:0], s.offsets[:0]
	s.queues = s.queues[:0]
}

// textFormat is the one format served: the text format every Prometheus
// reads, whatever it asks for first (Wharf's names need no escaping).
var textFormat = string(expfmt.NewFormat(expfmt.TypeTextPlain).WithEscapingScheme(model.UnderscoreEscaping))

var gzipPool = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

func (p *page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A collector that fails leaves its metrics out; the rest is served.
	families, err := p.registry.Gather()
	if err != nil && len(families) == 0 {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", textFormat)
	h.Add("Vary", "Accept-Encoding")
	var body io.Writer = w
	if acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		gz := gzipPool.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() {
			gz.Close()
			gzipPool.Put(gz)
		}()
		body = gz
	}
	s := scratchPool.Get().(*scratch)
	defer func() {
		s.reset()
		scratchPool.Put(s)
	}()
	e := &exposition{w: body, buf: s.out[:0]}
	for _, f := range families {
		// Gather checked the families; a write error is e's to keep.
		expfmt.MetricFamilyToText(e, f)
	}
	writeKafka(e, p.src.Broker, s)
	writeGroups(e, p.src.Groups(), s)
	writeQueues(e, p.src.Queues, p.perObject, s)
	e.flush() // an error is the client's: it went away
	s.out = e.buf
}

// acceptsGzip reports whether the request's Accept-Encoding admits gzip
// (Prometheus always sends "gzip").
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(coding, ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && !rejected(params) {
				return true
			}
		}
	}
	return false
}

// rejected reports whether an Accept-Encoding coding's parameters give it
// q=0.
func rejected(params string) bool {
	q, ok := strings.CutPrefix(strings.ReplaceAll(strings.TrimSpace(params), " ", ""), "q=")
	return ok && strings.Trim(q, "0.") == ""
}
