package routing

import "strings"

// SplitWords splits a routing or binding key into its dot-separated words
// as RabbitMQ does: the empty key has no words, and empty words are kept
// ("a..b" is "a", "", "b").
func SplitWords(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ".")
}

// TopicMatch reports whether the topic binding key pattern matches the
// routing key: '*' stands for exactly one word and '#' for zero or more.
// "order.#" therefore matches "order" as well as "order.a.b".
func TopicMatch(pattern, key string) bool {
	return matchWords(SplitWords(pattern), SplitWords(key))
}

// matchWords is wildcard matching over words. '#' behaves like a glob '*'
// and '*' like a glob '?', so the classic linear algorithm with one
// backtrack point applies: on a mismatch, let the most recent '#' swallow
// one more word and retry from there.
func matchWords(pattern, words []string) bool {
	p, w := 0, 0
	hashP, hashW := -1, 0 // position of the last '#' and the word it resumes at
	for w < len(words) {
		switch {
		case p < len(pattern) && pattern[p] == "#":
			hashP, hashW = p, w
			p++
		case p < len(pattern) && (pattern[p] == "*" || pattern[p] == words[w]):
			p++
			w++
		case hashP >= 0:
			hashW++
			p, w = hashP+1, hashW
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == "#" {
		p++
	}
	return p == len(pattern)
}
