package kafkaview

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wharf-mq/wharf/internal/record"
)

// Browsing bounds: what one request returns and reads at most.
const (
	defaultBrowseLimit = 50
	maxBrowseLimit     = 500
	// maxBrowseScan bounds the records one request looks at while
	// filtering; NextOffset tells where to go on.
	maxBrowseScan = 10_000
	// maxShownBytes is how much of a key, value or header value is
	// rendered; the rest is cut and marked.
	maxShownBytes = 64 << 10
)

// Formats a key or value can be shown in.
const (
	FormatText = "text" // UTF-8 text (hex when it is not valid UTF-8)
	FormatJSON = "json" // indented JSON (text when it does not parse)
	FormatHex  = "hex"  // bytes as space-separated hex pairs
)

// BrowseRequest asks for the records of one partition.
type BrowseRequest struct {
	Topic     string
	Partition int32
	// Offset is the first offset to read; below the log start it reads
	// from the start. Negative: read from Timestamp.
	Offset int64
	// Timestamp (ms) starts the read at the first record at or after it,
	// when Offset is negative; negative too: from the log start.
	Timestamp int64
	// Limit is the most records returned (0: 50; at most 500).
	Limit int
	// Key keeps only records whose key contains it, as text.
	Key string
	// Header keeps only records that carry a header of this name and,
	// when HeaderValue is set, whose value contains it.
	Header, HeaderValue string
	// Format is how keys, values and header values are rendered
	// (FormatText when empty).
	Format string
}

// Rendered is a key, value or header value as the console shows it. A
// null one is a nil *Rendered (JSON null).
type Rendered struct {
	Data string `json:"data"`
	// Format is the one used: the one asked for, or text or hex when
	// the bytes are not JSON or not text.
	Format    string `json:"format"`
	Size      int    `json:"size"` // bytes, before any cut
	Truncated bool   `json:"truncated,omitempty"`
}

// RenderedHeader is one record header.
type RenderedHeader struct {
	Key   string    `json:"key"`
	Value *Rendered `json:"value"`
}

// Record is one record as the browser shows it.
type Record struct {
	Partition int32            `json:"partition"`
	Offset    int64            `json:"offset"`
	Timestamp int64            `json:"timestamp"` // ms
	Key       *Rendered        `json:"key"`
	Value     *Rendered        `json:"value"`
	Headers   []RenderedHeader `json:"headers"`
}

// BrowseResult is one page of records. NextOffset is where the next page
// starts: after the last record returned, or after the last one looked
// at when the scan bound stopped a filtered read.
type BrowseResult struct {
	Records     []Record `json:"records"`
	NextOffset  int64    `json:"next_offset"`
	StartOffset int64    `json:"start_offset"`
	EndOffset   int64    `json:"end_offset"`
	Scanned     int      `json:"scanned"`
}

// errPageFull ends a read once the page is complete.
var errPageFull = errors.New("page full")

// Browse reads records of a partition, oldest first. Transaction markers
// are not shown.
func (v *View) Browse(req BrowseRequest) (BrowseResult, error) {
	limit := req.Limit
	if limit <= 0 {
		limit = defaultBrowseLimit
	}
	limit = min(limit, maxBrowseLimit)
	format := req.Format
	switch format {
	case "":
		format = FormatText
	case FormatText, FormatJSON, FormatHex:
	default:
		return BrowseResult{}, fmt.Errorf("%w: format %q: want %s, %s or %s", ErrInvalid, format, FormatText, FormatJSON, FormatHex)
	}
	p, err := v.partition(req.Topic, req.Partition)
	if err != nil {
		return BrowseResult{}, err
	}
	if err := p.Offline(); err != nil {
		return BrowseResult{}, err
	}
	res := BrowseResult{Records: []Record{}, StartOffset: p.StartOffset(), EndOffset: p.EndOffset()}
	from := req.Offset
	if from < 0 {
		from = res.StartOffset
		if req.Timestamp >= 0 {
			at, _, found, err := p.OffsetForTime(req.Timestamp)
			if err != nil {
				return res, err
			}
			from = res.EndOffset
			if found {
				from = at
			}
		}
	}
	from = min(max(from, res.StartOffset), res.EndOffset)
	res.NextOffset = from
	err = p.ReadRecords(from, func(h record.Header, recs []record.Record) error {
		if h.Control() {
			res.NextOffset = h.LastOffset() + 1
			return nil
		}
		for _, r := range recs {
			offset := h.BaseOffset + int64(r.OffsetDelta)
			res.Scanned++
			res.NextOffset = offset + 1
			if matches(r, req) {
				res.Records = append(res.Records, render(req.Partition, h, r, format))
			}
			if len(res.Records) == limit || res.Scanned == maxBrowseScan {
				return errPageFull
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return res, err
	}
	return res, nil
}

// matches applies a request's key and header filters to a record.
func matches(r record.Record, req BrowseRequest) bool {
	if req.Key != "" && (r.Key == nil || !bytes.Contains(r.Key, []byte(req.Key))) {
		return false
	}
	if req.Header == "" {
		return true
	}
	for _, h := range r.Headers {
		if h.Key == req.Header && (req.HeaderValue == "" || bytes.Contains(h.Value, []byte(req.HeaderValue))) {
			return true
		}
	}
	return false
}

func render(partition int32, h record.Header, r record.Record, format string) Record {
	ts := h.BaseTimestamp + r.TimestampDelta
	if h.LogAppendTime() {
		ts = h.MaxTimestamp
	}
	out := Record{Partition: partition, Offset: h.BaseOffset + int64(r.OffsetDelta), Timestamp: ts,
		Key: renderBytes(r.Key, format), Value: renderBytes(r.Value, format), Headers: []RenderedHeader{}}
	for _, rh := range r.Headers {
		out.Headers = append(out.Headers, RenderedHeader{Key: rh.Key, Value: renderBytes(rh.Value, format)})
	}
	return out
}

// renderBytes shows b in format, falling back to text for what is not
// JSON and to hex for what is not UTF-8 text; nil stays null.
func renderBytes(b []byte, format string) *Rendered {
	if b == nil {
		return nil
	}
	out := &Rendered{Size: len(b)}
	if format == FormatJSON {
		var indented bytes.Buffer
		if len(b) <= maxShownBytes && json.Indent(&indented, b, "", "  ") == nil {
			out.Data, out.Format = indented.String(), FormatJSON
			return out
		}
		format = FormatText
	}
	text := format == FormatText && utf8.Valid(b)
	if len(b) > maxShownBytes {
		cut := maxShownBytes
		for text && !utf8.RuneStart(b[cut]) {
			cut-- // cut text between runes
		}
		b, out.Truncated = b[:cut], true
	}
	if text {
		out.Data, out.Format = string(b), FormatText
	} else {
		out.Data, out.Format = spacedHex(b), FormatHex
	}
	return out
}

// spacedHex is b as hex byte pairs separated by spaces: "48 69".
func spacedHex(b []byte) string {
	var sb strings.Builder
	sb.Grow(3 * len(b))
	for i, c := range b {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(hex.EncodeToString([]byte{c}))
	}
	return sb.String()
}
