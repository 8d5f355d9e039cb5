package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
)

// Protocol is one assignment protocol a classic member supports, with the
// member's metadata for it (for consumers: its subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	Group      string
	MemberID   string  // "" on the first join
	InstanceID *string // group.instance.id of a static member (v5+)
	ClientID   string
	ClientHost string

	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration // v0 clients: the session timeout

	ProtocolType string
	Protocols    []Protocol // in the member's order of preference

	// RequireKnownMemberID (JoinGroup v4+, KIP-394): a dynamic member
	// joining without a member id gets one back with MEMBER_ID_REQUIRED
	// and must join again with it.
	RequireKnownMemberID bool
}

// JoinMember is one member as the leader learns of it.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResponse is the answer to a JoinGroup.
type JoinResponse struct {
	Err            error
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	MemberID       string // also set with ErrMemberIDRequired
	SkipAssignment bool   // a static leader rejoined a stable group (KIP-814)
	Members        []JoinMember
}

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string // v5+: checked against the group's when set
	Protocol     *string
	// Assignments is what the leader assigned each member.
	Assignments map[string][]byte
}

// SyncResponse is the answer to a SyncGroup.
type SyncResponse struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// HeartbeatRequest is a classic Heartbeat.
type HeartbeatRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
}

// LeavingMember is one member of a LeaveGroup request: a member id, or the
// instance id of a static member (with or without its member id).
type LeavingMember struct {
	MemberID   string
	InstanceID *string
}

// JoinGroup adds or updates a member and returns once the group's
// rebalance has produced the generation it is part of, or with an error.
// It waits at most until ctx ends, then answers ErrNotCoordinator.
func (c *Coordinator) JoinGroup(ctx context.Context, req JoinRequest) JoinResponse {
	ch, reply := replyOnce[JoinResponse]()
	c.join(req, reply)
	return wait(ctx, ch, JoinResponse{Err: ErrNotCoordinator})
}

// SyncGroup hands the leader's assignments to the group and returns the
// member's own, once the leader has sent them.
func (c *Coordinator) SyncGroup(ctx context.Context, req SyncRequest) SyncResponse {
	ch, reply := replyOnce[SyncResponse]()
	c.sync(req, reply)
	return wait(ctx, ch, SyncResponse{Err: ErrNotCoordinator})
}

// Heartbeat keeps a classic member's session alive and tells it when a
// rebalance has started.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	if err := validGroupID(req.Group, false); err != nil {
		return err
	}
	var result error
	err := c.withGroup(req.Group, false, func(g *group) { result = g.heartbeat(req) })
	if err != nil {
		return asUnknownMember(err)
	}
	return result
}

// LeaveGroup removes members; the result has one error (or nil) per
// member, in order.
func (c *Coordinator) LeaveGroup(groupID string, members []LeavingMember) ([]error, error) {
	if err := validGroupID(groupID, false); err != nil {
		return nil, err
	}
	results := make([]error, len(members))
	err := c.withGroup(groupID, false, func(g *group) { results = g.leave(members) })
	if err != nil {
		err = asUnknownMember(err)
		for i := range results {
			results[i] = err
		}
	}
	return results, nil
}

func (c *Coordinator) join(req JoinRequest, reply func(JoinResponse)) {
	fail := func(err error) { reply(JoinResponse{Err: err, MemberID: req.MemberID}) }
	if err := validGroupID(req.Group, false); err != nil {
		fail(err)
		return
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		fail(fmt.Errorf("%w: %v is outside [%v, %v]", ErrInvalidSessionTimeout, req.SessionTimeout, c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout))
		return
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		fail(fmt.Errorf("%w: a member must name a protocol type and at least one protocol", ErrInconsistentGroupProtocol))
		return
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	// Only a first join (no member id yet) may create the group.
	if err := c.withGroup(req.Group, req.MemberID == "", func(g *group) { g.join(req, reply) }); err != nil {
		fail(asUnknownMember(err))
	}
}

func (c *Coordinator) sync(req SyncRequest, reply func(SyncResponse)) {
	if err := validGroupID(req.Group, false); err != nil {
		reply(SyncResponse{Err: err})
		return
	}
	if err := c.withGroup(req.Group, false, func(g *group) { g.sync(req, reply) }); err != nil {
		reply(SyncResponse{Err: asUnknownMember(err)})
	}
}

// asUnknownMember turns "no such group" into what a member of it hears.
func asUnknownMember(err error) error {
	if errors.Is(err, ErrGroupIDNotFound) {
		return fmt.Errorf("%w: %v", ErrUnknownMemberID, err)
	}
	return err
}

// newMemberID makes a member id as Kafka does: the client id (or the
// instance id of a static member), a dash and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
