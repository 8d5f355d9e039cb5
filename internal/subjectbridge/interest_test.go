package subjectbridge

import (
	"slices"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/mq/routing"
	"github.com/wharf-mq/wharf/internal/subjects"
)

func TestSubjectPatterns(t *testing.T) {
	cases := map[string][]string{
		"orders":       {"orders"},
		"orders.*":     {"orders.*"},
		"*.eu.*":       {"*.eu.*"},
		"#":            {">"},
		"#.#":          {">"},
		"orders.#":     {"orders", "orders.>"},
		"orders.*.#.#": {"orders.*", "orders.*.>"},
		"orders.#.eu":  {"orders.>"},
		"#.eu":         {">"},
		"":             nil,
		"a..b":         nil,
		"a b.c":        nil,
		".#":           nil,
	}
	for key, want := range cases {
		if got := subjectPatterns(key); !slices.Equal(got, want) {
			t.Errorf("subjectPatterns(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestSubjectPatternsMatchAsTheBindingKey checks every binding key of up
// to four words from {a, b, *, #} against every subject of up to four
// words from {a, b, c}: the key's patterns must receive every subject the
// key matches under AMQP's rules, and only those unless the key has a '#'
// before its last word (then the exchange sorts them out).
func TestSubjectPatternsMatchAsTheBindingKey(t *testing.T) {
	keys := wordStrings([]string{"a", "b", "*", "#"}, 4)
	subjectsToTry := wordStrings([]string{"a", "b", "c"}, 4)
	for _, key := range keys {
		r := subjects.New()
		rec := &subjectRecorder{}
		for _, p := range subjectPatterns(key) {
			if _, err := r.Subscribe(p, interestGroup, rec); err != nil {
				t.Fatalf("key %q: pattern %q: %v", key, p, err)
			}
		}
		words := strings.Split(key, ".")
		hashInside := slices.Contains(words[:len(words)-1], "#") && !onlyHashes(words[slices.Index(words, "#"):])
		for _, s := range subjectsToTry {
			want := routing.TopicMatch(key, s)
			got := r.Publish(&subjects.Message{Subject: []byte(s)})
			if want && !got {
				t.Errorf("key %q matches %q, its patterns %q do not", key, s, subjectPatterns(key))
			}
			if got && !want && !hashInside {
				t.Errorf("key %q does not match %q, its patterns %q do", key, s, subjectPatterns(key))
			}
		}
	}
}

// wordStrings returns every '.'-joined string of 1 to n words.
func wordStrings(words []string, n int) []string {
	var out, last []string
	last = []string{""}
	for range n {
		var next []string
		for _, prefix := range last {
			for _, w := range words {
				s := w
				if prefix != "" {
					s = prefix + "." + w
				}
				next = append(next, s)
			}
		}
		out = append(out, next...)
		last = next
	}
	return out
}

// subjectRecorder is a Sink that takes everything.
type subjectRecorder struct{}

func (*subjectRecorder) Deliver(*subjects.Message) bool { return true }
