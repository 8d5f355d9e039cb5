package routing

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// The x-consistent-hash exchange type, as RabbitMQ's
// rabbitmq_consistent_hash_exchange plugin defines it: every binding's key
// is its weight, a positive integer; the bindings own consecutive runs of
// that many buckets, in the order they were added (a destination bound
// twice keeps the buckets of its first binding); a message goes to the
// owner of the bucket that jump consistent hashing picks for its hash
// value. So the same value always reaches the same destination while the
// bindings stay as they are, and adding a binding moves only the values
// that now land in its buckets.
//
// The hash function is not Erlang's phash2, so a given key does not land in
// the same queue as it would in RabbitMQ; only the properties above hold.

// HashOn says what an x-consistent-hash exchange hashes: the routing key
// (both fields empty), a header (hash-header) or a property
// (hash-property: message_id, correlation_id or timestamp).
type HashOn struct {
	Header, Property string
}

// hashProperties are the properties hash-property may name.
var hashProperties = []string{"correlation_id", "message_id", "timestamp"}

// ParseHashOn reads an x-consistent-hash exchange's arguments. The error
// texts are the plugin's, for a 406 PRECONDITION_FAILED.
func ParseHashOn(args amqpwire.Table) (HashOn, error) {
	var h HashOn
	header, hasHeader := stringArg(args, "hash-header")
	property, hasProperty := stringArg(args, "hash-property")
	switch {
	case hasHeader && hasProperty:
		return h, errors.New("hash-header and hash-property are mutually exclusive")
	case hasProperty && !slices.Contains(hashProperties, property):
		return h, fmt.Errorf("Unsupported property: %s", property)
	}
	h.Header, h.Property = header, property
	return h, nil
}

func stringArg(args amqpwire.Table, key string) (string, bool) {
	switch v := args[key].(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
}

// absentHashValue stands for a missing header or property: such messages
// all hash alike (the plugin hashes Erlang's 'undefined' and routes them
// to one destination rather than dropping them).
const absentHashValue = "\x00undefined"

// Value returns the string an x-consistent-hash exchange hashes for a
// message: its (first) routing key, or the chosen header or property.
func (h HashOn) Value(routingKey string, p *amqpwire.Properties) string {
	switch {
	case h.Header != "":
		v, ok := p.Headers[h.Header]
		if !ok {
			return absentHashValue
		}
		return hashableValue(v)
	case h.Property == "message_id":
		return nonEmpty(p.MessageID)
	case h.Property == "correlation_id":
		return nonEmpty(p.CorrelationID)
	case h.Property == "timestamp":
		if p.Timestamp.IsZero() {
			return absentHashValue
		}
		return strconv.FormatInt(p.Timestamp.Unix(), 10)
	}
	return routingKey
}

func nonEmpty(s string) string {
	if s == "" {
		return absentHashValue
	}
	return s
}

// hashableValue renders a header value so that equal values (by RabbitMQ's
// rules: integers of any width, strings and byte arrays) hash alike.
func hashableValue(v any) string {
	if s, ok := asBinary(v); ok {
		return s
	}
	if n, ok := TableInt(v); ok {
		return strconv.FormatInt(n, 10)
	}
	if t, ok := v.(time.Time); ok {
		return strconv.FormatInt(t.Unix(), 10)
	}
	return fmt.Sprint(v)
}

// parseWeight reads a consistent-hash binding key. Weights are clamped to
// 2^31-1 so that the bucket count cannot overflow.
func parseWeight(key string) (int64, error) {
	w, err := strconv.ParseInt(key, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, fmt.Errorf("The binding key must be an integer: <<%q>>", key)
		}
		if key[0] != '-' {
			return math.MaxInt32, nil
		}
		w = -1
	}
	if w < 1 {
		return 0, errors.New("The binding key must be greater than 0")
	}
	return min(w, math.MaxInt32), nil
}

// bucketRun is one destination's run of buckets: those below end and at
// or above the previous run's end.
type bucketRun[D comparable] struct {
	end  int64
	dest D
}

// rebuildRing lays the bindings' bucket runs out in binding order.
func (t *Table[D]) rebuildRing() {
	t.ring = t.ring[:0]
	total := int64(0)
	for _, e := range t.list {
		if slices.ContainsFunc(t.ring, func(r bucketRun[D]) bool { return r.dest == e.Dest }) {
			continue // the plugin keeps the first binding of a destination
		}
		total += e.weight
		t.ring = append(t.ring, bucketRun[D]{end: total, dest: e.Dest})
	}
}

// routeHash calls fn with the destination owning value's bucket.
func (t *Table[D]) routeHash(value string, fn func(D)) {
	n := len(t.ring)
	if n == 0 {
		return
	}
	b := JumpHash(HashString(value), t.ring[n-1].end)
	i, _ := slices.BinarySearchFunc(t.ring, b, func(r bucketRun[D], b int64) int {
		if r.end <= b {
			return -1
		}
		return 1
	})
	fn(t.ring[i].dest)
}

// HashString is a 64-bit hash of s: FNV-1a followed by the MurmurHash3
// finalizer, so that similar keys ("order-1", "order-2") spread well.
// It is stable across processes and versions: routing depends on it.
func HashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// JumpHash is Lamping and Veach's jump consistent hash: it maps key to a
// bucket in [0, buckets), and growing buckets to buckets+1 moves only the
// keys that land in the new last bucket.
func JumpHash(key uint64, buckets int64) int64 {
	b, j := int64(-1), int64(0)
	for j < buckets {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return b
}
