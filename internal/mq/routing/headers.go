package routing

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// MatchMode is a headers binding's x-match argument.
type MatchMode uint8

// The x-match values RabbitMQ accepts. All is the default.
const (
	MatchAll      MatchMode = iota // every non-x- argument must match
	MatchAny                       // at least one non-x- argument must match
	MatchAllWithX                  // as MatchAll, x- arguments included
	MatchAnyWithX                  // as MatchAny, x- arguments included
)

// ParseMatchMode reads the x-match argument of a headers binding. A missing
// x-match is MatchAll. The error text is RabbitMQ's, for a 406
// PRECONDITION_FAILED.
func ParseMatchMode(args amqpwire.Table) (MatchMode, error) {
	v, ok := args["x-match"]
	if !ok {
		return MatchAll, nil
	}
	s, isString := v.(string)
	if !isString {
		if b, isBytes := v.([]byte); isBytes {
			s, isString = string(b), true
		}
	}
	if !isString {
		return 0, fmt.Errorf("Invalid x-match field type %s (value %v); expected longstr", TypeName(v), v)
	}
	switch s {
	case "all":
		return MatchAll, nil
	case "any":
		return MatchAny, nil
	case "all-with-x":
		return MatchAllWithX, nil
	case "any-with-x":
		return MatchAnyWithX, nil
	}
	return 0, fmt.Errorf("Invalid x-match field value <<%q>>; expected all, any, all-with-x, or any-with-x", s)
}

// HeadersMatch reports whether a message with these headers matches a
// headers binding with these arguments. The x-match key itself never takes
// part; other keys starting with "x-" take part only in the -with-x modes.
// A binding argument whose value is void (nil) matches when the header is
// present with any value; otherwise the values must be equal (see
// ValuesEqual). With no arguments taking part, all-modes match and
// any-modes do not, as in RabbitMQ. An invalid x-match behaves as all.
func HeadersMatch(args, headers amqpwire.Table) bool {
	mode, err := ParseMatchMode(args)
	if err != nil {
		mode = MatchAll
	}
	return headersMatch(mode, args, headers)
}

func headersMatch(mode MatchMode, args, headers amqpwire.Table) bool {
	withX := mode == MatchAllWithX || mode == MatchAnyWithX
	any := mode == MatchAny || mode == MatchAnyWithX
	for k, want := range args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		got, present := headers[k]
		ok := present && (want == nil || ValuesEqual(want, got))
		if any && ok {
			return true
		}
		if !any && !ok {
			return false
		}
	}
	return !any
}

// ValuesEqual compares two field-table values the way RabbitMQ's headers
// exchange does (Erlang's =:= on the decoded values): integers of any width
// and signedness are equal when their values are; floats are equal to
// floats of the same value but never to integers; long strings and byte
// arrays are both binaries, so they compare by bytes; nested tables and
// arrays compare element by element.
func ValuesEqual(a, b any) bool {
	if ai, ok := TableInt(a); ok {
		bi, ok := TableInt(b)
		return ok && ai == bi
	}
	if af, ok := asFloat(a); ok {
		bf, ok := asFloat(b)
		return ok && af == bf
	}
	if as, ok := asBinary(a); ok {
		bs, ok := asBinary(b)
		return ok && as == bs
	}
	switch av := a.(type) {
	case nil:
		return b == nil
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case time.Time:
		bv, ok := b.(time.Time)
		return ok && av.Equal(bv)
	case amqpwire.Table:
		bv, ok := asTable(b)
		return ok && tablesEqual(av, bv)
	case map[string]any:
		bv, ok := asTable(b)
		return ok && tablesEqual(av, bv)
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !ValuesEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func tablesEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !ValuesEqual(av, bv) {
			return false
		}
	}
	return true
}

func asTable(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case amqpwire.Table:
		return t, true
	case map[string]any:
		return t, true
	}
	return nil, false
}

// TableInt returns a field-table integer value widened to int64 (uint64 values above
// MaxInt64 cannot come from a field table, whose widest unsigned type is 32
// bits).
func TableInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func asBinary(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// TypeName names a field-table value's type as RabbitMQ does in error texts
// ("longstr", "signedint", "long", ...).
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "void"
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case amqpwire.Decimal:
		return "decimal"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case []any:
		return "array"
	case time.Time:
		return "timestamp"
	case amqpwire.Table, map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}

// TypeClass groups types as RabbitMQ's argument equivalence check does:
// every integer type (and decimal) is "int", both float types are "float",
// the rest are their own class.
func TypeClass(v any) string {
	if _, ok := TableInt(v); ok {
		return "int"
	}
	switch v.(type) {
	case amqpwire.Decimal:
		return "int"
	case float32, float64:
		return "float"
	}
	return TypeName(v)
}
