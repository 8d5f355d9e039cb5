package subjects

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// recorder is a Sink that remembers the subjects it was given.
type recorder struct {
	mu       sync.Mutex
	name     string
	subjects []string
	refuse   bool
}

func (r *recorder) Deliver(m *Message) bool {
	if r.refuse {
		return false
	}
	r.mu.Lock()
	r.subjects = append(r.subjects, string(m.Subject))
	r.mu.Unlock()
	return true
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.subjects)
}

func mustSubscribe(t *testing.T, r *Router, pattern, queue string, s Sink) *Subscription {
	t.Helper()
	sub, err := r.Subscribe(pattern, queue, s)
	if err != nil {
		t.Fatalf("Subscribe(%q, %q): %v", pattern, queue, err)
	}
	return sub
}

func TestWildcardMatching(t *testing.T) {
	cases := []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"foo", []string{"foo"}, []string{"foo.bar", "fo", "bar"}},
		{"foo.*", []string{"foo.bar", "foo.*"}, []string{"foo", "foo.bar.baz", "bar.foo"}},
		{"*.bar", []string{"foo.bar", "x.bar"}, []string{"bar", "foo.bar.baz"}},
		{"foo.>", []string{"foo.bar", "foo.bar.baz"}, []string{"foo", "bar.foo"}},
		{">", []string{"foo", "foo.bar.baz"}, nil},
		{"*.*.>", []string{"a.b.c", "a.b.c.d"}, []string{"a.b", "a"}},
		{"a.*.c", []string{"a.b.c"}, []string{"a.b.d", "a.c", "a.b.c.d"}},
		{"a*.b", []string{"a*.b"}, []string{"ax.b"}}, // '*' inside a token is literal
	}
	for _, tc := range cases {
		r := New()
		rec := &recorder{}
		mustSubscribe(t, r, tc.pattern, "", rec)
		for _, s := range append(slices.Clone(tc.match), tc.miss...) {
			r.Publish(&Message{Subject: []byte(s)})
		}
		if got := rec.got(); !slices.Equal(got, tc.match) {
			t.Errorf("pattern %q received %q, want %q", tc.pattern, got, tc.match)
		}
	}
}

func TestMalformedPublishSubjectsMatchNothing(t *testing.T) {
	r := New()
	rec := &recorder{}
	mustSubscribe(t, r, ">", "", rec)
	for _, s := range []string{"", ".", "a.", ".a", "a..b"} {
		if r.Publish(&Message{Subject: []byte(s)}) {
			t.Errorf("subject %q was delivered", s)
		}
	}
}

func TestValidation(t *testing.T) {
	patterns := map[string]bool{
		"foo": true, "foo.bar": true, "*": true, ">": true, "foo.*.>": true, "a*.b>": true,
		"": false, ".": false, "foo.": false, ".foo": false, "foo..bar": false, ">.foo": false,
		"foo.>.bar": false, "foo bar": false, "foo\tbar": false,
	}
	for p, want := range patterns {
		if got := ValidPattern(p); got != want {
			t.Errorf("ValidPattern(%q) = %v, want %v", p, got, want)
		}
	}
	literals := map[string]bool{
		"foo": true, "foo.bar": true, "a*.b>": true,
		"": false, "foo.*": false, ">": false, "foo..bar": false, "foo.": false,
		"foo bar": false, "foo.b\tr": false, "a\r\nb": false,
	}
	for s, want := range literals {
		if got := ValidLiteral(s); got != want {
			t.Errorf("ValidLiteral(%q) = %v, want %v", s, got, want)
		}
	}
	if _, err := New().Subscribe("foo..bar", "", &recorder{}); err != ErrInvalidPattern {
		t.Errorf("Subscribe(foo..bar): %v, want ErrInvalidPattern", err)
	}
}

func TestQueueGroupsGetOneCopyEach(t *testing.T) {
	r := New()
	plain := &recorder{}
	mustSubscribe(t, r, "work.>", "", plain)
	groupA := []*recorder{{name: "a1"}, {name: "a2"}, {name: "a3"}}
	for i, rec := range groupA {
		// Members may subscribe with different patterns and still share.
		pattern := "work.*"
		if i == 0 {
			pattern = "work.>"
		}
		mustSubscribe(t, r, pattern, "A", rec)
	}
	groupB := &recorder{}
	mustSubscribe(t, r, "work.*", "B", groupB)

	const n = 300
	for range n {
		r.Publish(&Message{Subject: []byte("work.item")})
	}
	if got := len(plain.got()); got != n {
		t.Errorf("plain subscriber got %d, want %d", got, n)
	}
	if got := len(groupB.got()); got != n {
		t.Errorf("single-member group got %d, want %d", got, n)
	}
	total := 0
	for _, rec := range groupA {
		got := len(rec.got())
		if got == 0 {
			t.Errorf("member %s got nothing in %d messages", rec.name, n)
		}
		total += got
	}
	if total != n {
		t.Errorf("group A got %d messages in all, want exactly %d", total, n)
	}
}

func TestQueueMemberThatRefusesPassesItOn(t *testing.T) {
	r := New()
	refusing, taking := &recorder{refuse: true}, &recorder{}
	mustSubscribe(t, r, "q", "g", refusing)
	mustSubscribe(t, r, "q", "g", taking)
	for range 50 {
		if !r.Publish(&Message{Subject: []byte("q")}) {
			t.Fatal("message refused by the group")
		}
	}
	if got := len(taking.got()); got != 50 {
		t.Fatalf("accepting member got %d, want 50", got)
	}
	r2 := New()
	mustSubscribe(t, r2, "q", "g", &recorder{refuse: true})
	if r2.Publish(&Message{Subject: []byte("q")}) {
		t.Fatal("a group whose only member refuses reported delivery")
	}
}

func TestUnsubscribeInvalidatesCacheAndPrunes(t *testing.T) {
	r := New()
	var cache Cache
	rec := &recorder{}
	sub := mustSubscribe(t, r, "a.*.c", "", rec)
	qsub := mustSubscribe(t, r, "a.>", "g", rec)
	subject := []byte("a.b.c")
	if cache.Match(r, subject).Deliver(&Message{Subject: subject}) != true {
		t.Fatal("not delivered")
	}
	if len(rec.got()) != 2 {
		t.Fatalf("got %d deliveries, want 2", len(rec.got()))
	}
	stale := cache.Match(r, subject)
	r.Unsubscribe(sub)
	r.Unsubscribe(qsub)
	r.Unsubscribe(sub) // twice is harmless
	if stale.Deliver(&Message{Subject: subject}) {
		t.Fatal("a stale result delivered to removed subscriptions")
	}
	if res := cache.Match(r, subject); !res.Empty() {
		t.Fatalf("cache kept %d plain and %d groups after unsubscribe", len(res.Plain), len(res.Queues))
	}
	if !r.empty() {
		t.Fatal("tree not pruned after the last unsubscribe")
	}
}

func TestCacheIsBounded(t *testing.T) {
	r := New()
	mustSubscribe(t, r, ">", "", &recorder{})
	var cache Cache
	for i := range 5 * cacheLimit {
		cache.Match(r, []byte("s."+strconv.Itoa(i)))
	}
	if len(cache.results) > cacheLimit {
		t.Fatalf("cache holds %d results, limit %d", len(cache.results), cacheLimit)
	}
}

func TestConcurrentSubscribePublish(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			var cache Cache
			for {
				select {
				case <-stop:
					return
				default:
				}
				cache.Match(r, []byte("x.y")).Deliver(&Message{Subject: []byte("x.y")})
			}
		})
	}
	for range 2000 {
		sub := mustSubscribe(t, r, "x.*", "g", &recorder{})
		r.Unsubscribe(sub)
	}
	close(stop)
	wg.Wait()
	if !r.empty() {
		t.Fatal("tree not empty after every subscription was removed")
	}
}

func (r *Router) empty() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.root.literal) == 0 && r.root.any == nil && r.root.rest == nil
}

// counter is a Sink that counts the messages offered to it and takes
// them unless it refuses.
type counter struct {
	offered atomic.Int64
	refuse  bool
}

func (c *counter) Deliver(*Message) bool {
	c.offered.Add(1)
	return !c.refuse
}

// TestOneSinkSeveralPatternsInAGroup: a sink that subscribed overlapping
// patterns in one group of its own is offered each message once, whether
// it takes it or refuses it, while another member's sink still gets its
// turn after a refusal.
func TestOneSinkSeveralPatternsInAGroup(t *testing.T) {
	r := New()
	taker := &counter{}
	for _, p := range []string{"a.*", "*.b", "a.>", ">"} {
		mustSubscribe(t, r, p, "one sink", taker)
	}
	if !r.Publish(&Message{Subject: []byte("a.b")}) {
		t.Fatal("not delivered")
	}
	if n := taker.offered.Load(); n != 1 {
		t.Fatalf("a sink under 4 matching patterns was offered the message %d times, want 1", n)
	}

	r = New()
	refuser := &counter{refuse: true}
	for _, p := range []string{"a.*", "*.b", "a.>"} {
		mustSubscribe(t, r, p, "g", refuser)
	}
	if r.Publish(&Message{Subject: []byte("a.b")}) {
		t.Fatal("a refused message counts as delivered")
	}
	if n := refuser.offered.Load(); n != 1 {
		t.Fatalf("a refusing sink under 3 matching patterns was asked %d times, want 1", n)
	}
	other := &counter{}
	mustSubscribe(t, r, "a.b", "g", other)
	if !r.Publish(&Message{Subject: []byte("a.b")}) {
		t.Fatal("the other member did not get the refused message")
	}
	if n := other.offered.Load(); n != 1 {
		t.Fatalf("the other member was offered the message %d times, want 1", n)
	}
}
