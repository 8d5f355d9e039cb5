package jetstream

import (
	"slices"
	"strings"
)

// Subject patterns: '.'-separated tokens, '*' any one token, '>' (last)
// one or more (internal/subjects validates them).

// matchSubject reports whether the literal subject matches pattern.
func matchSubject(pattern, subject string) bool {
	for {
		ptok, prest, pmore := strings.Cut(pattern, ".")
		if ptok == ">" {
			return subject != ""
		}
		stok, srest, smore := strings.Cut(subject, ".")
		if ptok != "*" && ptok != stok {
			return false
		}
		if !pmore || !smore {
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}

// subjectsCollide reports whether some subject matches both patterns.
func subjectsCollide(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(at) && i == len(bt):
			return true
		case i == len(at) || i == len(bt):
			return false
		case at[i] == ">" || bt[i] == ">":
			return true
		case at[i] != "*" && bt[i] != "*" && at[i] != bt[i]:
			return false
		}
	}
}

// subsetMatch reports whether every subject sub matches also matches
// pattern.
func subsetMatch(sub, pattern string) bool {
	st, pt := strings.Split(sub, "."), strings.Split(pattern, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(pt):
			return i == len(st)
		case pt[i] == ">":
			return i < len(st)
		case i == len(st):
			return false
		case pt[i] == "*":
			if st[i] == ">" {
				return false
			}
		case pt[i] != st[i]:
			return false
		}
	}
}

// literal reports whether a pattern holds no wildcard token.
func literal(pattern string) bool {
	for tok := range strings.SplitSeq(pattern, ".") {
		if tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}

// filter is a consumer's subject filter: the patterns a message's subject
// must match one of; empty takes every message.
type filter []string

func (f filter) matches(subject string) bool {
	if len(f) == 0 {
		return true
	}
	for _, p := range f {
		if matchSubject(p, subject) {
			return true
		}
	}
	return false
}

// literal reports whether the filter takes a fixed set of subjects (so
// the subject index finds its next message without a read).
func (f filter) literal() bool {
	return len(f) > 0 && !slices.ContainsFunc(f, func(p string) bool { return !literal(p) })
}
