package group

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicState is a classic group's state, named as Kafka names it.
type classicState int8

const (
	classicEmpty classicState = iota
	classicPreparingRebalance
	classicCompletingRebalance
	classicStable
	classicDead
)

func (s classicState) String() string {
	switch s {
	case classicPreparingRebalance:
		return "PreparingRebalance"
	case classicCompletingRebalance:
		return "CompletingRebalance"
	case classicStable:
		return "Stable"
	case classicDead:
		return "Dead"
	}
	return "Empty"
}

// classicMember is one member of a classic group.
type classicMember struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string

	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []Protocol
	assignment       []byte
	joinOrder        uint64 // for a stable order: leader succession, member lists

	// joinReply and syncReply answer the member's parked JoinGroup or
	// SyncGroup. A member waiting in either cannot expire: its session
	// restarts when it is answered.
	joinReply func(JoinResponse)
	syncReply func(SyncResponse)

	sessionDeadline time.Time
}

func (m *classicMember) waiting() bool { return m.joinReply != nil || m.syncReply != nil }

// metadataFor is the member's metadata for a protocol.
func (m *classicMember) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether ps is what the member last joined with.
func (m *classicMember) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// classicGroup is the state of the classic protocol.
type classicGroup struct {
	state        classicState
	stateSince   time.Time
	generation   int32
	protocolType string // fixed by the first member ever; "" for commit-only groups
	protocol     string // chosen at each generation
	leader       string

	members map[string]*classicMember
	// pending holds member ids handed out with MEMBER_ID_REQUIRED, until
	// the member joins with one or its session timeout passes (KIP-394).
	pending map[string]time.Time
	static  map[string]string // instance id -> member id
	joinSeq uint64

	// PreparingRebalance: the join completes at joinDeadline at the
	// latest. While the initial delay of an empty group runs, it
	// completes only then, and each new member pushes it back by the
	// delay as long as initialBudget (what the rebalance timeout has
	// left after the first delay) lasts.
	joinDeadline   time.Time
	initialDelay   bool
	initialBudget  time.Duration
	newMemberAdded bool

	// CompletingRebalance: members still to send SyncGroup, removed at
	// syncDeadline if they have not.
	syncDeadline time.Time
	pendingSync  map[string]bool
}

func (cg *classicGroup) init(now time.Time) {
	cg.stateSince = now
	cg.members = map[string]*classicMember{}
	cg.pending = map[string]time.Time{}
	cg.static = map[string]string{}
}

func (cg *classicGroup) setState(s classicState, now time.Time) {
	cg.state = s
	cg.stateSince = now
}

// membersInJoinOrder lists the members in the order they first joined.
func (cg *classicGroup) membersInJoinOrder() []*classicMember {
	ms := slices.Collect(maps.Values(cg.members))
	slices.SortFunc(ms, func(a, b *classicMember) int { return cmp.Compare(a.joinOrder, b.joinOrder) })
	return ms
}

// supportsProtocols is Kafka's check of a joining member: the first member
// sets the protocol type; later ones must match it and support at least
// one protocol that every current member supports.
func (cg *classicGroup) supportsProtocols(protocolType string, ps []Protocol) bool {
	if len(cg.members) == 0 {
		return true
	}
	if protocolType != cg.protocolType {
		return false
	}
	for _, p := range ps {
		if cg.supportCount(p.Name) == len(cg.members) {
			return true
		}
	}
	return false
}

func (cg *classicGroup) supportCount(protocol string) int {
	n := 0
	for _, m := range cg.members {
		for _, mp := range m.protocols {
			if mp.Name == protocol {
				n++
				break
			}
		}
	}
	return n
}

// selectProtocol picks the generation's protocol as Kafka does: among the
// protocols all members support, each member votes for the one it prefers
// most; the most votes win, ties going to the leader's preference.
func (cg *classicGroup) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range cg.members {
		for _, p := range m.protocols {
			if cg.supportCount(p.Name) == len(cg.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	order := cg.members[cg.leader]
	if order == nil {
		order = cg.membersInJoinOrder()[0]
	}
	for _, p := range order.protocols {
		if v, ok := votes[p.Name]; ok && v > bestVotes {
			best, bestVotes = p.Name, v
		}
	}
	return best
}

// maxRebalanceTimeout is how long a rebalance may take: the longest
// rebalance timeout of the members.
func (cg *classicGroup) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range cg.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// allJoined reports whether every member, and every member id handed out
// and not yet used, has sent its JoinGroup for this rebalance.
func (cg *classicGroup) allJoined() bool {
	if len(cg.pending) > 0 {
		return false
	}
	for _, m := range cg.members {
		if m.joinReply == nil {
			return false
		}
	}
	return true
}

// joinResponse is a member's JoinGroup answer for the current generation;
// the leader also gets every member's metadata.
func (cg *classicGroup) joinResponse(memberID string) JoinResponse {
	r := JoinResponse{
		Generation:   cg.generation,
		ProtocolType: cg.protocolType,
		Protocol:     cg.protocol,
		Leader:       cg.leader,
		MemberID:     memberID,
	}
	if memberID == cg.leader {
		for _, m := range cg.membersInJoinOrder() {
			r.Members = append(r.Members, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadataFor(cg.protocol)})
		}
	}
	return r
}

// syncResponse is a member's SyncGroup answer.
func (cg *classicGroup) syncResponse(m *classicMember) SyncResponse {
	return SyncResponse{ProtocolType: cg.protocolType, Protocol: cg.protocol, Assignment: cg.assignmentOrEmpty(m.assignment)}
}

// emptyConsumerAssignment is an encoded ConsumerMemberAssignment with no
// partitions.
var emptyConsumerAssignment = func() []byte {
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}()

// assignmentOrEmpty is the assignment a member is sent. The broker passes
// the leader's bytes through untouched, except that a "consumer" member the
// leader gave nothing gets a decodable empty assignment rather than zero
// bytes, which some clients fail to parse.
func (cg *classicGroup) assignmentOrEmpty(a []byte) []byte {
	if len(a) == 0 && cg.protocolType == "consumer" {
		return emptyConsumerAssignment
	}
	return a
}

// nextDeadline is the earliest time something in the group may change on
// its own.
func (cg *classicGroup) nextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, exp := range cg.pending {
		earlier(exp)
	}
	for _, m := range cg.members {
		if !m.waiting() {
			earlier(m.sessionDeadline)
		}
	}
	switch cg.state {
	case classicPreparingRebalance:
		earlier(cg.joinDeadline)
	case classicCompletingRebalance:
		earlier(cg.syncDeadline)
	}
	return next
}
