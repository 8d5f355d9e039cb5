package subjectbridge

import (
	"strings"

	"github.com/wharf-mq/wharf/internal/subjects"
)

// subjectPatterns returns the NATS patterns whose subscriptions together
// receive every subject the topic binding key matches (a NATS subject is
// a routing key without empty words). They match exactly those subjects,
// but for a key with a '#' before its last word: that '#' and what
// follows become '>', wider than the key, and the exchange's own matching
// picks from what arrives. A key no NATS subject can match (empty, with an
// empty word or white space) has none.
func subjectPatterns(key string) []string {
	if key == "" {
		return nil
	}
	words := strings.Split(key, ".")
	for i, w := range words {
		if w != "#" {
			continue
		}
		prefix := strings.Join(words[:i], ".")
		switch {
		case i == 0:
			return []string{subjects.Rest}
		case onlyHashes(words[i+1:]):
			// Zero or more words after the prefix.
			return valid(prefix, prefix+".>")
		default:
			// At least one word after the prefix.
			return valid(prefix + ".>")
		}
	}
	return valid(key)
}

func onlyHashes(words []string) bool {
	for _, w := range words {
		if w != "#" {
			return false
		}
	}
	return true
}

// valid keeps the patterns a NATS subscription can have.
func valid(patterns ...string) []string {
	out := patterns[:0]
	for _, p := range patterns {
		if subjects.ValidPattern(p) {
			out = append(out, p)
		}
	}
	return out
}
