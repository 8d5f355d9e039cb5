package reliability

import (
	"fmt"
	"testing"
)

// tally counts what a check found, in the terms.
type tally struct {
	checked    int // acknowledged writes looked for
	lost       int // acknowledged, and missing or with other content
	unexpected int // present, but never written there (or not at all)
	duplicated int // present more than once
	outOfOrder int // a writer's acknowledged writes not in the order it made them
	survivors  int // present though not acknowledged before the cut/kill (allowed)
}

func (c tally) String() string {
	return fmt.Sprintf("acknowledged checked=%d lost=%d unexpected=%d duplicated=%d out-of-order=%d (unacknowledged survivors=%d)",
		c.checked, c.lost, c.unexpected, c.duplicated, c.outOfOrder, c.survivors)
}

func (c tally) ok() bool {
	return c.lost == 0 && c.unexpected == 0 && c.duplicated == 0 && c.outOfOrder == 0
}

func (c tally) add(o tally) tally {
	return tally{
		checked:    c.checked + o.checked,
		lost:       c.lost + o.lost,
		unexpected: c.unexpected + o.unexpected,
		duplicated: c.duplicated + o.duplicated,
		outOfOrder: c.outOfOrder + o.outOfOrder,
		survivors:  c.survivors + o.survivors,
	}
}

// maxReported bounds how many problems of one kind a check logs, and
// maxMessage the length of each (values can be long).
const (
	maxReported = 10
	maxMessage  = 400
)

// reporter logs the first few problems of each kind as test errors (or,
// for a check that is expected to find problems, as log lines).
type reporter struct {
	t        *testing.T
	where    string
	seen     map[string]int
	expected bool // problems are what the caller wants: log them, do not fail
}

func newReporter(t *testing.T, where string) *reporter {
	return &reporter{t: t, where: where, seen: map[string]int{}}
}

func (r *reporter) report(kind, format string, args ...any) {
	r.t.Helper()
	if r.seen[kind]++; r.seen[kind] > maxReported {
		return
	}
	msg := fmt.Sprintf("%s: %s: %s", r.where, kind, fmt.Sprintf(format, args...))
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "..."
	}
	if r.expected {
		r.t.Log("(expected) " + msg)
		return
	}
	r.t.Error(msg)
}
