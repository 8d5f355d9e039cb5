package group

import (
	"cmp"
	"maps"
	"slices"
)

// assignorMember is a member as the server-side assignors see it.
type assignorMember struct {
	id       string
	topics   map[string]bool // subscribed topics that exist
	previous partitionSet    // its previous target, for stickiness
}

// assignUniform is the "uniform" assignor: every partition of a subscribed
// topic goes to one member subscribed to it, the members' partition counts
// as even as their subscriptions allow, and as few partitions as possible
// move away from their previous member. Members come sorted by id.
func assignUniform(members []assignorMember, topics map[string]topicMeta) map[string]partitionSet {
	out := make(map[string]partitionSet, len(members))
	for _, m := range members {
		out[m.id] = partitionSet{}
	}
	if len(members) == 0 {
		return out
	}
	type candidate struct {
		tp       topicPartition
		eligible []string // member ids, sorted
	}
	var all []candidate
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		var eligible []string
		for _, m := range members {
			if m.topics[name] {
				eligible = append(eligible, m.id)
			}
		}
		if len(eligible) == 0 {
			continue
		}
		t := topics[name]
		for p := range t.partitions {
			all = append(all, candidate{topicPartition{t.id, p}, eligible})
		}
	}

	// Stickiness first: a partition stays with its previous member if
	// that member still wants it; then every other partition goes to the
	// least loaded member that wants it.
	prevOwner := map[topicPartition]string{}
	for _, m := range members {
		for tp := range m.previous {
			prevOwner[tp] = m.id
		}
	}
	var unassigned []candidate
	for _, c := range all {
		if id, ok := prevOwner[c.tp]; ok && slices.Contains(c.eligible, id) {
			out[id][c.tp] = struct{}{}
			continue
		}
		unassigned = append(unassigned, c)
	}
	leastLoaded := func(ids []string) string {
		best := ids[0]
		for _, id := range ids[1:] {
			if len(out[id]) < len(out[best]) {
				best = id
			}
		}
		return best
	}
	for _, c := range unassigned {
		id := leastLoaded(c.eligible)
		out[id][c.tp] = struct{}{}
	}

	// Then even out: move a partition from a member to one that wants it
	// and has at least two fewer, until no such move exists. Each move
	// lowers the sum of squared counts, so this ends.
	owner := map[topicPartition]string{}
	for id, set := range out {
		for tp := range set {
			owner[tp] = id
		}
	}
	for moved := true; moved; {
		moved = false
		for _, c := range all {
			from := owner[c.tp]
			to := leastLoaded(c.eligible)
			if len(out[to])+1 < len(out[from]) {
				delete(out[from], c.tp)
				out[to][c.tp] = struct{}{}
				owner[c.tp] = to
				moved = true
			}
		}
	}
	return out
}

// assignRange is the "range" assignor: for each topic, the members
// subscribed to it (sorted by id) get contiguous ranges of its partitions,
// the first ones one more when the count does not divide evenly, so that
// members subscribed to co-partitioned topics get the same partition
// numbers of each.
func assignRange(members []assignorMember, topics map[string]topicMeta) map[string]partitionSet {
	out := make(map[string]partitionSet, len(members))
	for _, m := range members {
		out[m.id] = partitionSet{}
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		var eligible []string
		for _, m := range members {
			if m.topics[name] {
				eligible = append(eligible, m.id)
			}
		}
		slices.SortFunc(eligible, cmp.Compare[string])
		if len(eligible) == 0 {
			continue
		}
		t := topics[name]
		n, k := int(t.partitions), len(eligible)
		per, extra := n/k, n%k
		for i, id := range eligible {
			start := i*per + min(i, extra)
			count := per
			if i < extra {
				count++
			}
			for p := start; p < start+count; p++ {
				out[id][topicPartition{t.id, int32(p)}] = struct{}{}
			}
		}
	}
	return out
}
