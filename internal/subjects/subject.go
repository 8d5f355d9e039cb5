package subjects

import "strings"

// Separator splits a subject into tokens; AnyToken and Rest are the
// wildcards a subscription pattern may hold, each as a whole token.
const (
	Separator = '.'
	AnyToken  = "*"
	Rest      = ">"
)

// ValidPattern reports whether s can be subscribed to: at least one token,
// no empty token, no token after '>', no white space. It is nats-server's
// check for SUB (a wildcard character inside a longer token, as in "a*",
// is an ordinary character).
func ValidPattern(s string) bool {
	if s == "" {
		return false
	}
	sawRest := false
	for tok := range strings.SplitSeq(s, string(Separator)) {
		if tok == "" || sawRest || strings.ContainsAny(tok, " \t\r\n\f") {
			return false
		}
		sawRest = tok == Rest
	}
	return true
}

// ValidLiteral reports whether s can be published to under NATS's pedantic
// checks: no empty token and no wildcard token.
func ValidLiteral(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, string(Separator)) {
		if tok == "" || tok == AnyToken || tok == Rest {
			return false
		}
	}
	return true
}
