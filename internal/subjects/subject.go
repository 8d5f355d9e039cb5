package subjects

import "strings"

// Separator splits a subject into tokens; AnyToken and Rest are the
// wildcards a subscription pattern may hold, each as a whole token.
const (
	Separator = '.'
	AnyToken  = "*"
	Rest      = ">"
)

// whiteSpace separates the arguments of a protocol line, so no subject
// holds any of it.
const whiteSpace = " \t\r\n\f"

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
		if tok == "" || sawRest || strings.ContainsAny(tok, whiteSpace) {
			return false
		}
		sawRest = tok == Rest
	}
	return true
}

// ValidLiteral reports whether s can be published to under NATS's pedantic
// checks: no empty token, no wildcard token, no white space (which a PUB
// line cannot carry, but a name from another protocol can).
func ValidLiteral(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, string(Separator)) {
		if tok == "" || tok == AnyToken || tok == Rest || strings.ContainsAny(tok, whiteSpace) {
			return false
		}
	}
	return true
}
