package subjectbridge

import (
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// contentType is the NATS header that is AMQP's content_type property.
const contentType = "Content-Type"

// maxShortString is the longest AMQP short string: routing keys, reply_to,
// content_type, header names.
const maxShortString = 255

// fromNATSHeader reads a NATS header block ("NATS/1.0\r\nName: value\r\n
// ...\r\n\r\n") as an AMQP headers table and content type, keeping the
// names' case as nats.go does. The status on the first line, which only
// servers send, is left out.
func fromNATSHeader(block []byte) (headers amqpwire.Table, ctype string) {
	_, s, _ := strings.Cut(string(block), "\r\n")
	for {
		line, rest, ok := strings.Cut(s, "\r\n")
		if !ok || line == "" {
			return headers, ctype
		}
		s = rest
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || len(name) > maxShortString {
			continue
		}
		value = strings.TrimLeft(value, " \t")
		if ctype == "" && strings.EqualFold(name, contentType) && len(value) <= maxShortString {
			ctype = value
			continue
		}
		if headers == nil {
			headers = amqpwire.Table{}
		}
		switch prev := headers[name].(type) {
		case nil:
			headers[name] = value
		case string:
			headers[name] = []any{prev, value}
		case []any:
			headers[name] = append(prev, value)
		}
	}
}

// natsHeader writes p's content type and headers as a NATS header block,
// or returns nil when there is nothing to write.
func natsHeader(p *amqpwire.Properties) []byte {
	var b []byte
	add := func(name, value string) {
		if strings.ContainsAny(value, "\r\n") {
			return
		}
		if b == nil {
			b = append(b, "NATS/1.0\r\n"...)
		}
		b = append(b, name...)
		b = append(b, ": "...)
		b = append(b, value...)
		b = append(b, "\r\n"...)
	}
	if p.ContentType != "" {
		add(contentType, p.ContentType)
	}
	for name, v := range p.Headers {
		if !validHeaderName(name) {
			continue
		}
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				if s, ok := headerText(e); ok {
					add(name, s)
				}
			}
		} else if s, ok := headerText(v); ok {
			add(name, s)
		}
	}
	if b == nil {
		return nil
	}
	return append(b, "\r\n"...)
}

// validHeaderName reports whether name can be a NATS header name: printable
// ASCII without ':'.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == ':' {
			return false
		}
	}
	return true
}

// headerText is an AMQP field value as NATS header text, if it is a
// scalar that has one.
func headerText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case time.Time:
		return x.UTC().Format(time.RFC3339), true
	case nil:
		return "", true
	}
	return "", false
}
