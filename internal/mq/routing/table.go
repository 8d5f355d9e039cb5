package routing

import (
	"fmt"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Kind is an exchange type.
type Kind uint8

// The exchange types Wharf implements.
const (
	Direct Kind = iota + 1
	Fanout
	Topic
	Headers
	ConsistentHash // x-consistent-hash (see consistent_hash.go)
)

// ParseKind maps an exchange type name to its Kind.
func ParseKind(name string) (Kind, bool) {
	switch name {
	case "direct":
		return Direct, true
	case "fanout":
		return Fanout, true
	case "topic":
		return Topic, true
	case "headers":
		return Headers, true
	case "x-consistent-hash":
		return ConsistentHash, true
	}
	return 0, false
}

// String returns the exchange type's name.
func (k Kind) String() string {
	switch k {
	case Direct:
		return "direct"
	case Fanout:
		return "fanout"
	case Topic:
		return "topic"
	case Headers:
		return "headers"
	case ConsistentHash:
		return "x-consistent-hash"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Binding is one binding out of an exchange: destination, binding key and
// arguments. Two bindings are the same when all three are; arguments are
// compared by their canonical encoding.
type Binding[D comparable] struct {
	Dest D
	Key  string
	Args amqpwire.Table
}

// entry is a binding with what matching needs precomputed.
type entry[D comparable] struct {
	Binding[D]
	argsKey string    // canonical encoding of Args, part of the identity
	words   []string  // topic: the key split into words
	mode    MatchMode // headers: the parsed x-match
	weight  int64     // consistent hash: the key as a number of buckets
}

// Table is the set of bindings whose source is one exchange, indexed for
// its kind: direct bindings by key, the others in a list that Route scans
// (in the order they were added), consistent-hash bindings also as a ring
// of bucket runs.
type Table[D comparable] struct {
	kind   Kind
	list   []*entry[D]            // fanout, topic, headers, consistent hash: every binding
	byKey  map[string][]*entry[D] // direct: bindings by key
	ring   []bucketRun[D]         // consistent hash: bucket runs in binding order
	length int
}

// NewTable returns an empty table for an exchange of kind k.
func NewTable[D comparable](k Kind) *Table[D] {
	t := &Table[D]{kind: k}
	if k == Direct {
		t.byKey = make(map[string][]*entry[D])
	}
	return t
}

// Kind returns the table's exchange kind.
func (t *Table[D]) Kind() Kind { return t.kind }

// Len returns the number of bindings.
func (t *Table[D]) Len() int { return t.length }

// Validate checks a binding for an exchange of kind k: a headers binding's
// x-match must be valid, a consistent-hash binding's key must be a positive
// integer. The error text is RabbitMQ's, meant for a 406
// PRECONDITION_FAILED.
func Validate(k Kind, key string, args amqpwire.Table) error {
	switch k {
	case Headers:
		_, err := ParseMatchMode(args)
		return err
	case ConsistentHash:
		_, err := parseWeight(key)
		return err
	}
	return nil
}

// ArgsKey returns the canonical encoding of binding arguments, which is
// what makes two bindings with equal arguments the same binding.
func ArgsKey(args amqpwire.Table) (string, error) {
	if len(args) == 0 {
		return "", nil
	}
	b, err := amqpwire.AppendTable(nil, args)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (t *Table[D]) newEntry(b Binding[D]) (*entry[D], error) {
	if err := Validate(t.kind, b.Key, b.Args); err != nil {
		return nil, err
	}
	ak, err := ArgsKey(b.Args)
	if err != nil {
		return nil, err
	}
	e := &entry[D]{Binding: b, argsKey: ak}
	switch t.kind {
	case Topic:
		e.words = SplitWords(b.Key)
	case Headers:
		e.mode, _ = ParseMatchMode(b.Args)
	case ConsistentHash:
		e.weight, _ = parseWeight(b.Key)
	}
	return e, nil
}

func (t *Table[D]) bucket(key string) []*entry[D] {
	if t.kind == Direct {
		return t.byKey[key]
	}
	return t.list
}

func (t *Table[D]) setBucket(key string, es []*entry[D]) {
	if t.kind != Direct {
		t.list = es
		return
	}
	if len(es) == 0 {
		delete(t.byKey, key)
	} else {
		t.byKey[key] = es
	}
}

func (t *Table[D]) find(es []*entry[D], e *entry[D]) int {
	for i, x := range es {
		if x.Dest == e.Dest && x.Key == e.Key && x.argsKey == e.argsKey {
			return i
		}
	}
	return -1
}

// Add adds a binding. It reports false if the same binding already exists
// (adding it again is not an error, as in AMQP). The error is Validate's,
// or an argument table that cannot be encoded.
func (t *Table[D]) Add(b Binding[D]) (added bool, err error) {
	e, err := t.newEntry(b)
	if err != nil {
		return false, err
	}
	es := t.bucket(b.Key)
	if t.find(es, e) >= 0 {
		return false, nil
	}
	t.setBucket(b.Key, append(es, e))
	t.length++
	t.bindingsChanged()
	return true, nil
}

// Has reports whether the binding exists.
func (t *Table[D]) Has(b Binding[D]) bool {
	ak, err := ArgsKey(b.Args)
	if err != nil {
		return false
	}
	return t.find(t.bucket(b.Key), &entry[D]{Binding: b, argsKey: ak}) >= 0
}

// Remove removes a binding and reports whether it existed.
func (t *Table[D]) Remove(b Binding[D]) bool {
	ak, err := ArgsKey(b.Args)
	if err != nil {
		return false
	}
	es := t.bucket(b.Key)
	i := t.find(es, &entry[D]{Binding: b, argsKey: ak})
	if i < 0 {
		return false
	}
	t.setBucket(b.Key, deleteAt(es, i))
	t.length--
	t.bindingsChanged()
	return true
}

// RemoveDest removes every binding to d and returns them.
func (t *Table[D]) RemoveDest(d D) []Binding[D] {
	var removed []Binding[D]
	filter := func(es []*entry[D]) []*entry[D] {
		kept := es[:0]
		for _, e := range es {
			if e.Dest == d {
				removed = append(removed, e.Binding)
			} else {
				kept = append(kept, e)
			}
		}
		clear(es[len(kept):])
		return kept
	}
	if t.kind == Direct {
		for k, es := range t.byKey {
			t.setBucket(k, filter(es))
		}
	} else {
		t.list = filter(t.list)
	}
	t.length -= len(removed)
	t.bindingsChanged()
	return removed
}

// bindingsChanged keeps derived indexes in step with the bindings.
func (t *Table[D]) bindingsChanged() {
	if t.kind == ConsistentHash {
		t.rebuildRing()
	}
}

// Bindings returns every binding, in no particular order for direct tables
// and in insertion order for the others.
func (t *Table[D]) Bindings() []Binding[D] {
	out := make([]Binding[D], 0, t.length)
	if t.kind == Direct {
		for _, es := range t.byKey {
			for _, e := range es {
				out = append(out, e.Binding)
			}
		}
		return out
	}
	for _, e := range t.list {
		out = append(out, e.Binding)
	}
	return out
}

// Route calls fn with the destination of every binding that matches a
// message with this routing key and these headers. A destination bound
// several times may be passed several times; the caller deduplicates.
// For a consistent-hash table routingKey is the value to hash (see
// HashOn.Value) and exactly one destination is chosen, if there is any
// binding.
func (t *Table[D]) Route(routingKey string, headers amqpwire.Table, fn func(D)) {
	switch t.kind {
	case Direct:
		for _, e := range t.byKey[routingKey] {
			fn(e.Dest)
		}
	case Fanout:
		for _, e := range t.list {
			fn(e.Dest)
		}
	case Topic:
		if len(t.list) == 0 {
			return
		}
		words := SplitWords(routingKey)
		for _, e := range t.list {
			if matchWords(e.words, words) {
				fn(e.Dest)
			}
		}
	case Headers:
		for _, e := range t.list {
			if headersMatch(e.mode, e.Args, headers) {
				fn(e.Dest)
			}
		}
	case ConsistentHash:
		t.routeHash(routingKey, fn)
	}
}

func deleteAt[T any](s []T, i int) []T {
	copy(s[i:], s[i+1:])
	var zero T
	s[len(s)-1] = zero
	return s[:len(s)-1]
}
