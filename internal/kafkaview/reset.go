package kafkaview

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/offsetreset"
)

// ResetRequest asks for new committed offsets of a group, as `wharf
// groups reset-offsets` does: a mode (one of offsetreset.Modes) and its
// value, the partitions, and whether to apply the plan or only show it.
type ResetRequest struct {
	Mode  string `json:"mode"`
	Value string `json:"value"`
	// Topics are the topics to reset, each with the partitions to reset
	// (none listed: all of them).
	Topics []TopicPartitions `json:"topics"`
	// AllTopics adds every partition the group has committed.
	AllTopics bool `json:"all_topics"`
	Execute   bool `json:"execute"`
}

// ResetStep is one partition of a plan.
type ResetStep struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current_offset"` // -1: none committed
	Next      int64  `json:"new_offset"`
	Error     string `json:"error,omitempty"`
}

// ResetResult is the plan, and whether it was committed.
type ResetResult struct {
	Group    string      `json:"group"`
	Mode     string      `json:"mode"`
	Steps    []ResetStep `json:"plan"`
	Executed bool        `json:"executed"`
}

// ResetOffsets plans new committed offsets for a group and, with Execute,
// commits them. It refuses (ErrConflict wrapping an
// *offsetreset.LiveMembersError) while the group has live members, and
// commits nothing when a partition of the plan failed.
func (v *View) ResetOffsets(groupName string, req ResetRequest) (ResetResult, error) {
	res := ResetResult{Group: groupName, Mode: req.Mode, Steps: []ResetStep{}}
	groups, err := v.groups()
	if err != nil {
		return res, err
	}
	mode, err := offsetreset.ParseMode(req.Mode, req.Value, v.now())
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(req.Topics) == 0 && !req.AllTopics {
		return res, fmt.Errorf("%w: name the partitions to reset (topics) or set all_topics", ErrInvalid)
	}
	if err := checkResettable(groups, groupName); err != nil {
		return res, err
	}
	committed, err := groups.FetchOffsets(group.FetchRequest{Group: groupName})
	if err != nil {
		return res, err
	}
	targets, err := v.resetTargets(req, committed)
	if err != nil {
		return res, err
	}
	plan := offsetreset.Plan(mode, v.resetOffsetsOf(targets, committed, mode.Timestamp()))
	for _, s := range plan {
		step := ResetStep{Topic: s.Topic, Partition: s.Partition, Current: s.Current, Next: s.Next}
		if s.Err != nil {
			step.Error = s.Err.Error()
		}
		res.Steps = append(res.Steps, step)
	}
	if !req.Execute {
		return res, nil
	}
	if err := commitPlan(groups, groupName, plan); err != nil {
		return res, err
	}
	res.Executed = true
	return res, nil
}

// checkResettable refuses a group with live members.
func checkResettable(groups *group.Coordinator, groupName string) error {
	d := groups.DescribeGroups([]string{groupName})[0]
	if errors.Is(d.Err, group.ErrGroupIDNotFound) {
		return nil // no group yet: the reset creates its offsets
	}
	if d.Err != nil {
		return d.Err
	}
	if err := offsetreset.CheckResettable(groupName, len(d.Members), d.State); err != nil {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return nil
}

// resetTargets expands a request's topics (and all_topics) into sorted,
// distinct partitions that exist.
func (v *View) resetTargets(req ResetRequest, committed []group.FetchedOffset) ([]group.TopicPartition, error) {
	var out []group.TopicPartition
	add := func(tp group.TopicPartition) {
		if !slices.Contains(out, tp) {
			out = append(out, tp)
		}
	}
	if req.AllTopics {
		for _, o := range committed {
			if o.Err == nil && o.Offset >= 0 {
				add(group.TopicPartition{Topic: o.Topic, Partition: o.Partition})
			}
		}
	}
	for _, spec := range req.Topics {
		t, err := v.topic(spec.Topic)
		if err != nil {
			return nil, err
		}
		n := int32(len(t.Partitions()))
		if len(spec.Partitions) == 0 {
			for p := range n {
				add(group.TopicPartition{Topic: spec.Topic, Partition: p})
			}
			continue
		}
		for _, p := range spec.Partitions {
			if p < 0 || p >= n {
				return nil, fmt.Errorf("%w: topic %s has no partition %d", ErrNotFound, spec.Topic, p)
			}
			add(group.TopicPartition{Topic: spec.Topic, Partition: p})
		}
	}
	slices.SortFunc(out, func(a, b group.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// resetOffsetsOf looks up what the plan needs of each partition: the
// committed offset, the log's range and, when timestamp >= 0, the first
// offset at or after it.
func (v *View) resetOffsetsOf(targets []group.TopicPartition, committed []group.FetchedOffset, timestamp int64) []offsetreset.Partition {
	committedAt := make(map[group.TopicPartition]int64, len(committed))
	for _, o := range committed {
		if o.Err == nil {
			committedAt[group.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	}
	out := make([]offsetreset.Partition, 0, len(targets))
	for _, tp := range targets {
		op := offsetreset.Partition{Topic: tp.Topic, Partition: tp.Partition, Committed: -1, AtTime: -1}
		if o, ok := committedAt[tp]; ok {
			op.Committed = o
		}
		p, err := v.partition(tp.Topic, tp.Partition)
		if err == nil {
			err = p.Offline()
		}
		if err != nil {
			op.Err = err
			out = append(out, op)
			continue
		}
		op.Start, op.End = p.StartOffset(), p.EndOffset()
		if timestamp >= 0 {
			at, _, found, err := p.OffsetForTime(timestamp)
			switch {
			case err != nil:
				op.Err = err
			case found:
				op.AtTime = at
			}
		}
		out = append(out, op)
	}
	return out
}

// commitPlan commits a plan as an admin tool does (no member, generation
// -1), which the coordinator accepts only while the group is empty.
func commitPlan(groups *group.Coordinator, groupName string, plan []offsetreset.Step) error {
	offsets := make([]group.OffsetCommit, 0, len(plan))
	for _, s := range plan {
		if s.Err != nil {
			return fmt.Errorf("%w: nothing committed: %s[%d]: %v", ErrInvalid, s.Topic, s.Partition, s.Err)
		}
		offsets = append(offsets, group.OffsetCommit{Topic: s.Topic, Partition: s.Partition, Offset: s.Next, LeaderEpoch: -1})
	}
	for _, err := range groups.CommitOffsets(group.CommitRequest{Group: groupName, Generation: -1, Offsets: offsets}) {
		switch {
		case errors.Is(err, group.ErrUnknownMemberID), errors.Is(err, group.ErrIllegalGeneration):
			return fmt.Errorf("%w: group %s has live members again; nothing committed: %v", ErrConflict, groupName, err)
		case err != nil:
			return err
		}
	}
	return nil
}
