package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
)

// apiError is RabbitMQ's error body.
type apiError struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, errText, reason string) {
	writeJSON(w, status, apiError{Error: errText, Reason: reason})
}

// writeNotFound is RabbitMQ's answer for a missing object or path.
func writeNotFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
}

// writeNoVHost is RabbitMQ's answer to a write into a missing vhost,
// which names what is missing where a read gets the plain 404.
func writeNoVHost(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "not_found", "vhost_not_found")
}

func writeUnauthorized(w http.ResponseWriter, reason string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	writeError(w, http.StatusUnauthorized, "not_authorized", reason)
}

func writeBadRequest(w http.ResponseWriter, reason string) {
	writeError(w, http.StatusBadRequest, "bad_request", reason)
}

// writeMQError answers an error from mq as RabbitMQ's API answers the
// same failure: 404 not_found for NOT_FOUND (and NOT_ALLOWED, mq's
// missing vhost), 401 "Access refused." for
// ACCESS_REFUSED (an amq. name, the default exchange), 400 bad_request
// for an invalid policy and for the other AMQP errors (inequivalent
// arguments, in use, not empty), with the reply text less its code name;
// 500 for anything else.
func writeMQError(w http.ResponseWriter, err error) {
	var pe *mq.PolicyError
	if errors.As(err, &pe) {
		writeBadRequest(w, pe.Reason)
		return
	}
	var we *amqpwire.Error
	if !errors.As(err, &we) || we.Code == amqpwire.CodeInternalError {
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	reason := replyDetail(we)
	switch we.Code {
	case amqpwire.CodeNotFound:
		writeError(w, http.StatusNotFound, "not_found", reason)
	case amqpwire.CodeNotAllowed: // the vhost went away meanwhile
		writeNoVHost(w)
	case amqpwire.CodeAccessRefused:
		writeError(w, http.StatusUnauthorized, "not_authorised", "Access refused.")
	default:
		writeBadRequest(w, reason)
	}
}

// replyDetail is an AMQP error's text without its leading code name
// ("NOT_FOUND - no queue 'q' ..." becomes "no queue 'q' ...").
func replyDetail(e *amqpwire.Error) string {
	if name := amqpwire.ReplyCodeName(e.Code); name != "" {
		return strings.TrimPrefix(e.Text, name+" - ")
	}
	return e.Text
}

// jsonValue turns an AMQP field value into what RabbitMQ's API shows:
// byte arrays as text, tables as objects, arrays as lists.
func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case amqpwire.Table:
		return jsonTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}

// jsonTable is jsonValue for a table; never nil, so it encodes as {}.
func jsonTable(t amqpwire.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = jsonValue(v)
	}
	return out
}

// putStats adds stats to obj as RabbitMQ shows them: "publish": 10,
// "publish_details": {"rate": 2.0}.
func putStats(obj map[string]any, stats []rate.Stat) {
	for _, st := range stats {
		obj[st.Name] = st.Value
		obj[st.Name+"_details"] = map[string]any{"rate": st.Rate}
	}
}

// statsObject is putStats into a new object (a message_stats).
func statsObject(stats []rate.Stat) map[string]any {
	obj := make(map[string]any, 2*len(stats))
	putStats(obj, stats)
	return obj
}
