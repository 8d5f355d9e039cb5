package kafka

import (
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/group"
)

// The group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
// DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat,
// ConsumerGroupDescribe) translate requests for the group coordinator
// (internal/group), which holds every rule; these files only move fields.

// coordinator returns the group coordinator, or the error every group API
// answers on a server that has none.
func (s *Server) coordinator() (*group.Coordinator, error) {
	groups := s.groups.Load()
	if groups == nil {
		return nil, kafkaErrorf(kerr.CoordinatorNotAvailable, "this server runs no group coordinator")
	}
	return groups, nil
}

// groupCoordinator is coordinator for a request that needs op on group
// name: GROUP_AUTHORIZATION_FAILED when r may not.
func (s *Server) groupCoordinator(r *request, op kmsg.ACLOperation, name string) (*group.Coordinator, error) {
	if !s.allowed(r, op, resGroup, name) {
		return nil, errGroupDenied
	}
	return s.coordinator()
}

// clientHost is how Kafka shows a member's address: "/" and its IP.
func clientHost(r *request) string {
	host, _, err := net.SplitHostPort(r.conn.remote)
	if err != nil {
		host = r.conn.remote
	}
	return "/" + host
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
