package subjects

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrInvalidPattern is returned by Subscribe for a pattern ValidPattern
// refuses.
var ErrInvalidPattern = errors.New("subjects: invalid subject")

// Message is one published message on its way to the subscribers. Its
// slices belong to the publisher and are valid only during the Deliver
// call: a Sink that keeps a message copies what it needs.
type Message struct {
	Subject []byte
	Reply   []byte // empty: no reply expected
	// Header is the NATS header block ("NATS/1.0\r\n...\r\n\r\n"), nil
	// for a message without headers.
	Header  []byte
	Payload []byte
	// Source is who published the message, so that a subscriber can
	// recognise its own messages (NATS's echo=false) and a bridge can
	// avoid sending a message back where it came from. Nil: unknown.
	Source any
}

// Sink is the receiving end of a subscription. Sinks are compared (see
// Result.Deliver), so a Sink's dynamic type must be comparable: a
// pointer, say.
type Sink interface {
	// Deliver hands m to the subscriber and reports whether it took it
	// (false, for example, for its own message when it asked not to see
	// those, or once it is closed). Deliver runs on the publisher's
	// goroutine, possibly on several at once, and must not block for
	// long; it must not call Subscribe or Unsubscribe for the sink's own
	// subscription other than to remove it.
	Deliver(m *Message) bool
}

// Subscription is one registered interest: a pattern, an optional queue
// group and the sink that receives matching messages.
type Subscription struct {
	pattern string
	queue   string
	sink    Sink
	removed atomic.Bool
}

// Sink is the subscription's receiving end.
func (s *Subscription) Sink() Sink { return s.sink }

// Router holds every subscription in a tree of subject tokens. It is safe
// for concurrent use.
type Router struct {
	mu   sync.RWMutex
	root *level
	// generation changes with every Subscribe and Unsubscribe, so that
	// cached results are known to be stale.
	generation atomic.Uint64
}

// level is one token position of the tree: the literal tokens seen there,
// and the '*' and '>' wildcards.
type level struct {
	literal map[string]*node
	any     *node // '*'
	rest    *node // '>'
}

// node holds the subscriptions whose pattern ends at it, and the level of
// the tokens that follow.
type node struct {
	next   *level
	plain  map[*Subscription]struct{}
	queues map[string]map[*Subscription]struct{}
}

// New returns an empty Router.
func New() *Router { return &Router{root: &level{}} }

// Generation is a number that changes whenever the set of subscriptions
// changes.
func (r *Router) Generation() uint64 { return r.generation.Load() }

// Subscribe registers sink's interest in pattern, in queue group queue
// ("" for none).
func (r *Router) Subscribe(pattern, queue string, sink Sink) (*Subscription, error) {
	if !ValidPattern(pattern) {
		return nil, ErrInvalidPattern
	}
	// Cloned so that a pattern sliced from a large read buffer does not
	// keep that buffer alive.
	sub := &Subscription{pattern: strings.Clone(pattern), queue: strings.Clone(queue), sink: sink}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.root.nodeFor(sub.pattern)
	if queue == "" {
		if n.plain == nil {
			n.plain = make(map[*Subscription]struct{})
		}
		n.plain[sub] = struct{}{}
	} else {
		if n.queues == nil {
			n.queues = make(map[string]map[*Subscription]struct{})
		}
		members := n.queues[sub.queue]
		if members == nil {
			members = make(map[*Subscription]struct{})
			n.queues[sub.queue] = members
		}
		members[sub] = struct{}{}
	}
	r.generation.Add(1)
	return sub, nil
}

// Unsubscribe removes sub. Deliveries that start after it returns skip
// sub, even through a cached Result; one already under way on another
// goroutine may still reach its sink. Removing a subscription twice is
// harmless.
func (r *Router) Unsubscribe(sub *Subscription) {
	if sub.removed.Swap(true) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.root.remove(strings.Split(sub.pattern, string(Separator)), sub)
	r.generation.Add(1)
}

// nodeFor returns the node pattern ends at, creating the path to it.
func (l *level) nodeFor(pattern string) *node {
	var n *node
	for tok := range strings.SplitSeq(pattern, string(Separator)) {
		switch tok {
		case AnyToken:
			if l.any == nil {
				l.any = &node{}
			}
			n = l.any
		case Rest:
			if l.rest == nil {
				l.rest = &node{}
			}
			n = l.rest
		default:
			if l.literal == nil {
				l.literal = make(map[string]*node)
			}
			n = l.literal[tok]
			if n == nil {
				n = &node{}
				l.literal[tok] = n
			}
		}
		if n.next == nil {
			n.next = &level{}
		}
		l = n.next
	}
	return n
}

// remove takes sub out of the node its tokens lead to and prunes the
// nodes left empty on the way back.
func (l *level) remove(tokens []string, sub *Subscription) {
	if l == nil || len(tokens) == 0 {
		return
	}
	var n *node
	switch tokens[0] {
	case AnyToken:
		n = l.any
	case Rest:
		n = l.rest
	default:
		n = l.literal[tokens[0]]
	}
	if n == nil {
		return
	}
	if len(tokens) == 1 {
		if sub.queue == "" {
			delete(n.plain, sub)
		} else if members := n.queues[sub.queue]; members != nil {
			delete(members, sub)
			if len(members) == 0 {
				delete(n.queues, sub.queue)
			}
		}
	} else {
		n.next.remove(tokens[1:], sub)
	}
	if n.empty() {
		switch tokens[0] {
		case AnyToken:
			l.any = nil
		case Rest:
			l.rest = nil
		default:
			delete(l.literal, tokens[0])
		}
	}
}

func (n *node) empty() bool {
	return len(n.plain) == 0 && len(n.queues) == 0 &&
		(n.next == nil || (len(n.next.literal) == 0 && n.next.any == nil && n.next.rest == nil))
}

// Result is the set of subscriptions a subject matches. It is immutable;
// a cached Result may hold subscriptions removed since, which Deliver
// skips.
type Result struct {
	Plain  []*Subscription
	Queues [][]*Subscription // one slice per queue group, never empty
}

var emptyResult = &Result{}

// Empty reports whether nothing matched.
func (res *Result) Empty() bool { return len(res.Plain) == 0 && len(res.Queues) == 0 }

// Match returns the subscriptions whose patterns match subject. A subject
// with an empty token matches nothing.
func (r *Router) Match(subject []byte) *Result {
	var tokensArray [32][]byte
	tokens := tokensArray[:0]
	start := 0
	for i, b := range subject {
		if b == Separator {
			if i == start {
				return emptyResult
			}
			tokens = append(tokens, subject[start:i])
			start = i + 1
		}
	}
	if start >= len(subject) {
		return emptyResult
	}
	tokens = append(tokens, subject[start:])

	res := &Result{}
	r.mu.RLock()
	r.root.match(tokens, res)
	r.mu.RUnlock()
	if res.Empty() {
		return emptyResult
	}
	return res
}

func (l *level) match(tokens [][]byte, res *Result) {
	for len(tokens) > 0 && l != nil {
		// '>' matches this token and all that follow.
		if l.rest != nil {
			res.add(l.rest)
		}
		if l.any != nil {
			if len(tokens) == 1 {
				res.add(l.any)
			} else {
				l.any.next.match(tokens[1:], res)
			}
		}
		n := l.literal[string(tokens[0])]
		if n == nil {
			return
		}
		if len(tokens) == 1 {
			res.add(n)
			return
		}
		l, tokens = n.next, tokens[1:]
	}
}

func (res *Result) add(n *node) {
	for sub := range n.plain {
		res.Plain = append(res.Plain, sub)
	}
	for name, members := range n.queues {
		group := res.group(name)
		for sub := range members {
			*group = append(*group, sub)
		}
	}
}

// group returns the slot of queue group name, adding it if needed: a
// group whose members subscribed with different patterns is still one
// group.
func (res *Result) group(name string) *[]*Subscription {
	for i := range res.Queues {
		if res.Queues[i][0].queue == name {
			return &res.Queues[i]
		}
	}
	res.Queues = append(res.Queues, nil)
	return &res.Queues[len(res.Queues)-1]
}

// Deliver hands m to every plain subscription and to one member of every
// queue group, picked at random; a member that refuses the message passes
// it to the next, skipping members with the sink that refused (a sink
// that subscribed several patterns in one group answers for all of
// them). It reports whether any subscription took the message.
func (res *Result) Deliver(m *Message) bool {
	delivered := false
	for _, sub := range res.Plain {
		if !sub.removed.Load() && sub.sink.Deliver(m) {
			delivered = true
		}
	}
	for _, members := range res.Queues {
		start := 0
		if len(members) > 1 {
			start = rand.IntN(len(members))
		}
		var refused Sink
		for i := range members {
			sub := members[(start+i)%len(members)]
			if sub.removed.Load() || (refused != nil && sub.sink == refused) {
				continue
			}
			if sub.sink.Deliver(m) {
				delivered = true
				break
			}
			refused = sub.sink
		}
	}
	return delivered
}

// Publish delivers m to every subscription its subject matches and
// reports whether any took it.
func (r *Router) Publish(m *Message) bool { return r.Match(m.Subject).Deliver(m) }
