package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Request body limits: definitions can be large; a published message is
// at most amqp.DefaultMaxMessageSize, base64-encoded.
const (
	maxBodyBytes        = 1 << 20
	maxDefinitionsBytes = 64 << 20
	maxPublishBytes     = 24 << 20
)

// decodeBody reads a JSON body of at most limit bytes into v, numbers as
// json.Number. On failure it answers 400 as RabbitMQ does ("not_json",
// or what a field could not take) and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.UseNumber()
	err := dec.Decode(v)
	if err == nil {
		return true
	}
	var fe *fieldError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &fe):
		writeFieldError(w, fe)
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "bad_request", fmt.Sprintf("body larger than %d bytes", mbe.Limit))
	default:
		writeBadRequest(w, "not_json")
	}
	return false
}

// key is a key a request body must have, and whether it has it.
type key struct {
	name    string
	present bool
}

// requireKeys answers RabbitMQ's 400 listing the keys a body lacks, in
// order, and returns false; true if it has them all.
func requireKeys(w http.ResponseWriter, keys ...key) bool {
	var missing []string
	for _, k := range keys {
		if !k.present {
			missing = append(missing, k.name)
		}
	}
	if len(missing) == 0 {
		return true
	}
	writeBadRequest(w, "[{key_missing,"+strings.Join(missing, "},{key_missing,")+"}]")
	return false
}

// fieldError is a value RabbitMQ would not take: kind is its term for
// what is wrong ("not_boolean"), value the value.
type fieldError struct{ kind, value string }

func (e *fieldError) Error() string { return e.kind + " " + e.value }

// writeFieldError is RabbitMQ's 400 for a field error, whose reason is a
// list: ["not_boolean", "maybe"].
func writeFieldError(w http.ResponseWriter, e *fieldError) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad_request", "reason": []string{e.kind, e.value}})
}

// flexBool is a boolean that may also come as the string "true" or
// "false", as rabbitmqadmin sends them. Set says it was present.
type flexBool struct{ Set, V bool }

func (b *flexBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v {
	case true, "true":
		*b = flexBool{Set: true, V: true}
	case false, "false":
		*b = flexBool{Set: true}
	default:
		return &fieldError{"not_boolean", string(bytes.Trim(data, `"`))}
	}
	return nil
}

// flexInt is an integer that may also come as a numeric string
// (rabbitmqadmin sends "count": "1").
type flexInt struct {
	Set bool
	V   int64
}

func (n *flexInt) UnmarshalJSON(data []byte) error {
	s := string(bytes.Trim(data, `"`))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return &fieldError{"not_int", s}
	}
	*n = flexInt{Set: true, V: v}
	return nil
}

// tableOf turns JSON arguments (decoded with UseNumber) into an AMQP
// field table: integers become int64, other numbers float64, objects
// tables, the rest what JSON made of them.
func tableOf(m map[string]any) amqpwire.Table {
	if m == nil {
		return nil
	}
	t := make(amqpwire.Table, len(m))
	for k, v := range m {
		t[k] = amqpValue(v)
	}
	return t
}

func amqpValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return tableOf(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amqpValue(e)
		}
		return out
	}
	return v
}
