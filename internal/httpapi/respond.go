package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
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

func writeUnauthorized(w http.ResponseWriter, reason string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	writeError(w, http.StatusUnauthorized, "not_authorized", reason)
}

func writeBadRequest(w http.ResponseWriter, reason string) {
	writeError(w, http.StatusBadRequest, "bad_request", reason)
}

// writeMQError maps an error from mq to a status: 404 for NOT_FOUND (and
// a missing vhost), 400 for an invalid policy, 500 otherwise.
func writeMQError(w http.ResponseWriter, err error) {
	var pe *mq.PolicyError
	if errors.As(err, &pe) {
		writeBadRequest(w, pe.Reason)
		return
	}
	var we *amqpwire.Error
	if errors.As(err, &we) && (we.Code == amqpwire.CodeNotFound || we.Code == amqpwire.CodeNotAllowed) {
		writeNotFound(w)
		return
	}
	writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
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
