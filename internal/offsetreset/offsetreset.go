// Package offsetreset plans new committed offsets for a consumer group's
// partitions, with the modes and rules of kafka-consumer-groups.sh
// --reset-offsets: to the earliest or latest offset, to an offset, shifted
// by N, to a time, or to a time a duration ago; never while the group has
// live members. It is pure: callers look the offsets up (the CLI over the
// Kafka protocol, the HTTP API in the broker) and commit the plan.
package offsetreset

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Modes are the names of the reset modes, as the CLI flags spell them.
var Modes = []string{"to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime", "by-duration"}

// Mode is how a reset picks each partition's new offset.
type Mode struct {
	name string
	n    int64 // the offset of to-offset, the shift of shift-by
	// timestamp is the time (ms) whose offsets to-datetime and
	// by-duration need, -1 for the other modes.
	timestamp int64
}

// ParseMode reads a mode and its value (empty for to-earliest and
// to-latest): an integer for to-offset and shift-by, a time for
// to-datetime (see ParseDatetime), an ISO-8601 duration before now for
// by-duration (see ParseISODuration).
func ParseMode(name, value string, now time.Time) (Mode, error) {
	m := Mode{name: name, timestamp: -1}
	switch name {
	case "to-earliest", "to-latest":
	case "to-offset", "shift-by":
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return m, fmt.Errorf("%q is not an integer", value)
		}
		m.n = n
	case "to-datetime":
		t, err := ParseDatetime(value)
		if err != nil {
			return m, err
		}
		m.timestamp = t.UnixMilli()
	case "by-duration":
		d, err := ParseISODuration(value)
		if err != nil {
			return m, err
		}
		m.timestamp = now.Add(-d).UnixMilli()
	default:
		return m, fmt.Errorf("unknown reset mode %q: want one of %s", name, strings.Join(Modes, ", "))
	}
	return m, nil
}

// Timestamp is the time (ms) whose offsets the plan needs in
// Partition.AtTime, or -1 when the mode needs none.
func (m Mode) Timestamp() int64 { return m.timestamp }

// Partition is what a plan needs to know of one partition.
type Partition struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset, -1 for none.
	Committed int64
	// Start and End are the log start and end offsets.
	Start, End int64
	// AtTime is the first offset whose record is at or after
	// Mode.Timestamp, -1 when there is none (the plan then takes End).
	AtTime int64
	// Err says why the offsets could not be looked up; the step then
	// fails with it.
	Err error
}

// Step is one line of a plan: a partition's current committed offset (-1:
// none) and the one the reset commits, or why it cannot.
type Step struct {
	Topic     string
	Partition int32
	Current   int64
	Next      int64
	Err       error
}

// Plan computes the new offset of every partition, in order. Offsets out
// of the log's range are moved into it, as Kafka does.
func Plan(m Mode, parts []Partition) []Step {
	plan := make([]Step, 0, len(parts))
	for _, p := range parts {
		s := Step{Topic: p.Topic, Partition: p.Partition, Current: p.Committed, Err: p.Err}
		if s.Err == nil {
			s.Next, s.Err = m.target(p)
		}
		plan = append(plan, s)
	}
	return plan
}

// target is one partition's new offset.
func (m Mode) target(p Partition) (int64, error) {
	clamp := func(o int64) int64 { return min(max(o, p.Start), p.End) }
	switch m.name {
	case "to-earliest":
		return p.Start, nil
	case "to-latest":
		return p.End, nil
	case "to-offset":
		return clamp(m.n), nil
	case "shift-by":
		if p.Committed < 0 {
			return 0, errors.New("no committed offset to shift")
		}
		return clamp(p.Committed + m.n), nil
	}
	if p.AtTime < 0 {
		return p.End, nil // nothing at or after the time
	}
	return clamp(p.AtTime), nil
}

// LiveMembersError refuses a reset of a group with live members: they
// would overwrite the new offsets with their next commit, and the broker
// refuses commits from outside a group that has members anyway.
type LiveMembersError struct {
	Group   string
	Members int
	State   string
}

func (e *LiveMembersError) Error() string {
	return fmt.Sprintf("group %s has %d live member(s) (state %s): stop its consumers before resetting its offsets",
		e.Group, e.Members, e.State)
}

// CheckResettable returns a *LiveMembersError when the group has members,
// nil otherwise (a group that does not exist yet may be reset: the reset
// creates its offsets).
func CheckResettable(group string, members int, state string) error {
	if members > 0 {
		return &LiveMembersError{Group: group, Members: members, State: state}
	}
	return nil
}

// datetimeLayouts are the forms ParseDatetime accepts: Kafka's
// YYYY-MM-DDTHH:mm:SS.sss, optionally without the milliseconds, optionally
// followed by a zone.
var datetimeLayouts = []string{
	"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05.000", "2006-01-02T15:04:05",
}

// ParseDatetime reads a to-datetime value, in local time unless a zone
// follows (Z, +01:00), as kafka-consumer-groups.sh does.
func ParseDatetime(s string) (time.Time, error) {
	for _, layout := range datetimeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want YYYY-MM-DDTHH:mm:SS.sss, optionally followed by a zone (Z, +01:00)")
}

// isoDuration is the ISO-8601 duration subset Java's Duration.parse reads:
// days, hours, minutes and (fractional) seconds.
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,9})?)S)?)?$`)

// ParseISODuration reads a by-duration value such as PT1H or P1DT12H.
func ParseISODuration(s string) (time.Duration, error) {
	upper := strings.ToUpper(s)
	m := isoDuration.FindStringSubmatch(upper)
	if m == nil || upper == "P" || strings.HasSuffix(upper, "T") {
		return 0, errors.New("want an ISO-8601 duration such as PT1H, PT30M, P1DT12H or PT0.5S")
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, err := strconv.ParseInt(m[i+1], 10, 64)
			if err != nil {
				return 0, err
			}
			d += time.Duration(n) * unit
		}
	}
	if m[4] != "" {
		secs, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return 0, err
		}
		d += time.Duration(secs * float64(time.Second))
	}
	return d, nil
}
