package routing

import (
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestTopicMatch(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		{"order.*.created", "order.eu.created", true},
		{"order.*.created", "order.created", false},
		{"order.*.created", "order.eu.west.created", false},
		{"order.*.created", "order.eu.created.x", false},
		{"order.#", "order", true},
		{"order.#", "order.a", true},
		{"order.#", "order.a.b.c", true},
		{"order.#", "orders.a", false},
		{"order.#", "", false},
		{"#", "", true},
		{"#", "a", true},
		{"#", "a.b.c", true},
		{"*", "", false},
		{"*", "a", true},
		{"*", "a.b", false},
		{"", "", true},
		{"", "a", false},
		{"#.created", "created", true},
		{"#.created", "order.eu.created", true},
		{"#.created", "order.eu.created.no", false},
		{"a.#.z", "a.z", true},
		{"a.#.z", "a.b.c.z", true},
		{"a.#.z", "a.b.c.y", false},
		{"a.#.#.z", "a.z", true},
		{"#.*", "", false},
		{"#.*", "a", true},
		{"#.b.#", "a.b.c", true},
		{"#.b.#", "b", true},
		{"#.b.#", "a.c", false},
		{"*.#.*", "a", false},
		{"*.#.*", "a.b", true},
		{"a.*.#.b", "a.x.b.b", true},
		{"a..b", "a..b", true},
		{"a.*.b", "a..b", true},
		{"a.b", "a.b", true},
		{"a.b", "a.B", false},
	}
	for _, c := range cases {
		if got := TopicMatch(c.pattern, c.key); got != c.want {
			t.Errorf("TopicMatch(%q, %q) = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}

func TestHeadersMatch(t *testing.T) {
	msg := amqpwire.Table{"format": "pdf", "type": "report", "size": int32(10), "x-trace": "on"}
	cases := []struct {
		name string
		args amqpwire.Table
		want bool
	}{
		{"all default, all present", amqpwire.Table{"format": "pdf", "type": "report"}, true},
		{"all explicit, one differs", amqpwire.Table{"x-match": "all", "format": "pdf", "type": "log"}, false},
		{"all, one missing", amqpwire.Table{"format": "pdf", "missing": "v"}, false},
		{"any, one matches", amqpwire.Table{"x-match": "any", "format": "zip", "type": "report"}, true},
		{"any, none matches", amqpwire.Table{"x-match": "any", "format": "zip", "type": "log"}, false},
		{"all, no args", amqpwire.Table{"x-match": "all"}, true},
		{"any, no args", amqpwire.Table{"x-match": "any"}, false},
		{"all ignores x- args", amqpwire.Table{"format": "pdf", "x-trace": "off"}, true},
		{"any ignores x- args", amqpwire.Table{"x-match": "any", "x-trace": "on"}, false},
		{"all-with-x compares x- args", amqpwire.Table{"x-match": "all-with-x", "format": "pdf", "x-trace": "off"}, false},
		{"all-with-x matching x- arg", amqpwire.Table{"x-match": "all-with-x", "x-trace": "on"}, true},
		{"any-with-x on x- arg", amqpwire.Table{"x-match": "any-with-x", "x-trace": "on", "format": "zip"}, true},
		{"void matches presence", amqpwire.Table{"format": nil}, true},
		{"void needs presence", amqpwire.Table{"nope": nil}, false},
		{"integer widths compare by value", amqpwire.Table{"size": int64(10)}, true},
		{"integer value differs", amqpwire.Table{"size": int64(11)}, false},
		{"float never equals integer", amqpwire.Table{"size": float64(10)}, false},
		{"bytes equal string", amqpwire.Table{"format": []byte("pdf")}, true},
	}
	for _, c := range cases {
		if got := HeadersMatch(c.args, msg); got != c.want {
			t.Errorf("%s: HeadersMatch(%v) = %v, want %v", c.name, c.args, got, c.want)
		}
	}
	if HeadersMatch(amqpwire.Table{"format": "pdf"}, nil) {
		t.Error("binding with an argument matched a message without headers")
	}
	if !HeadersMatch(nil, nil) {
		t.Error("binding without arguments (x-match all) did not match")
	}
}

func TestParseMatchModeErrors(t *testing.T) {
	if _, err := ParseMatchMode(amqpwire.Table{"x-match": "some"}); err == nil {
		t.Error("x-match some accepted")
	} else if want := `Invalid x-match field value <<"some">>; expected all, any, all-with-x, or any-with-x`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := ParseMatchMode(amqpwire.Table{"x-match": int32(1)}); err == nil {
		t.Error("non-string x-match accepted")
	}
}

func route[D comparable](tb *Table[D], key string, headers amqpwire.Table) []D {
	var out []D
	tb.Route(key, headers, func(d D) { out = append(out, d) })
	slices.SortFunc(out, func(a, b D) int {
		// Only used with strings in these tests.
		return compareAny(a, b)
	})
	return out
}

func compareAny[D comparable](a, b D) int {
	as, bs := any(a).(string), any(b).(string)
	switch {
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

func TestDirectTable(t *testing.T) {
	tb := NewTable[string](Direct)
	mustAdd(t, tb, "q1", "k", nil)
	mustAdd(t, tb, "q2", "k", nil)
	mustAdd(t, tb, "q3", "other", nil)
	if added, _ := tb.Add(Binding[string]{Dest: "q1", Key: "k"}); added {
		t.Error("duplicate binding added")
	}
	mustAdd(t, tb, "q1", "k", amqpwire.Table{"a": int32(1)}) // other args: another binding
	if tb.Len() != 4 {
		t.Fatalf("Len = %d, want 4", tb.Len())
	}
	if got := route(tb, "k", nil); !slices.Equal(got, []string{"q1", "q1", "q2"}) {
		t.Errorf("route k = %v", got)
	}
	if got := route(tb, "K", nil); len(got) != 0 {
		t.Errorf("route K = %v", got)
	}
	// int64(1) encodes differently from int32(1): another binding, as in
	// RabbitMQ, where binding arguments keep their types.
	if tb.Remove(Binding[string]{Dest: "q1", Key: "k", Args: amqpwire.Table{"a": int64(1)}}) {
		t.Error("Remove matched arguments of another type")
	}
	if !tb.Remove(Binding[string]{Dest: "q1", Key: "k", Args: amqpwire.Table{"a": int32(1)}}) {
		t.Error("Remove with equal args failed")
	}
	if tb.Remove(Binding[string]{Dest: "q1", Key: "nope"}) {
		t.Error("Remove of a missing binding reported true")
	}
	removed := tb.RemoveDest("q1")
	if len(removed) != 1 || tb.Len() != 2 {
		t.Errorf("RemoveDest removed %v, Len %d", removed, tb.Len())
	}
	if got := route(tb, "k", nil); !slices.Equal(got, []string{"q2"}) {
		t.Errorf("route k after removal = %v", got)
	}
}

func TestFanoutTopicHeadersTables(t *testing.T) {
	fan := NewTable[string](Fanout)
	mustAdd(t, fan, "a", "ignored", nil)
	mustAdd(t, fan, "b", "", nil)
	if got := route(fan, "anything", nil); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("fanout = %v", got)
	}

	top := NewTable[string](Topic)
	mustAdd(t, top, "created", "order.*.created", nil)
	mustAdd(t, top, "orders", "order.#", nil)
	mustAdd(t, top, "all", "#", nil)
	for key, want := range map[string][]string{
		"order.eu.created": {"all", "created", "orders"},
		"order":            {"all", "orders"},
		"invoice.x":        {"all"},
		"":                 {"all"},
	} {
		if got := route(top, key, nil); !slices.Equal(got, want) {
			t.Errorf("topic %q = %v, want %v", key, got, want)
		}
	}

	hdr := NewTable[string](Headers)
	mustAdd(t, hdr, "all", "", amqpwire.Table{"x-match": "all", "a": "1", "b": "2"})
	mustAdd(t, hdr, "any", "", amqpwire.Table{"x-match": "any", "a": "1", "b": "2"})
	if got := route(hdr, "", amqpwire.Table{"a": "1"}); !slices.Equal(got, []string{"any"}) {
		t.Errorf("headers a=1: %v", got)
	}
	if got := route(hdr, "", amqpwire.Table{"a": "1", "b": "2"}); !slices.Equal(got, []string{"all", "any"}) {
		t.Errorf("headers a=1,b=2: %v", got)
	}
	if _, err := hdr.Add(Binding[string]{Dest: "bad", Args: amqpwire.Table{"x-match": "nope"}}); err == nil {
		t.Error("invalid x-match accepted by Add")
	}
}

func mustAdd(t *testing.T, tb *Table[string], dest, key string, args amqpwire.Table) {
	t.Helper()
	added, err := tb.Add(Binding[string]{Dest: dest, Key: key, Args: args})
	if err != nil || !added {
		t.Fatalf("Add(%s, %q, %v) = %v, %v", dest, key, args, added, err)
	}
}
