package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// ElectLeaders (key 43), v0-v2 (KIP-183, KIP-460).
//
// PREFERRED (v0's only type) hands each partition's leadership to its
// preferred replica, the first (broker.Partition.ElectPreferredLeader),
// and answers once that replica leads: NONE, or ELECTION_NOT_NEEDED
// (v1+; NONE in v0, which predates that code) if it led already,
// PREFERRED_LEADER_NOT_AVAILABLE if it is not in sync,
// ELIGIBLE_LEADERS_NOT_AVAILABLE for an offline partition, and
// REQUEST_TIMED_OUT if the move did not complete within TimeoutMillis.
// Partitions are elected concurrently. UNCLEAN elects nothing: Raft never
// makes an out-of-sync replica leader, so a partition with a leader needs
// no election and one without has no eligible leader. Null topics (v1+)
// ask for every partition, and the answer lists only those that needed an
// election, as Kafka's does. An unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION. It needs ALTER on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED). On a single node every partition is led
// by its only replica.

// electTimeout is the wait of a request that gives no TimeoutMillis.
const electTimeout = 60 * time.Second

func (s *Server) handleElectLeaders(r *request, req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	allowed := s.allowedCluster(r, opAlter)
	if !allowed && req.Version >= 1 {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	topics := req.Topics
	all := topics == nil && req.Version >= 1
	if all {
		topics = s.everyPartition()
	}
	timeout := electTimeout
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	answers := make([][]error, len(topics))
	var wg sync.WaitGroup
	for i, rt := range topics {
		answers[i] = make([]error, len(rt.Partitions))
		for j, p := range rt.Partitions {
			if !allowed {
				answers[i][j] = errClusterDenied
				continue
			}
			wg.Go(func() { answers[i][j] = s.elect(ctx, req.ElectionType, rt.Topic, p) })
		}
	}
	wg.Wait()
	for i, rt := range topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		for j, p := range rt.Partitions {
			err := answers[i][j]
			if errors.Is(err, broker.ErrElectionNotNeeded) {
				if all {
					continue
				}
				if req.Version == 0 {
					err = nil
				}
			}
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			t.Partitions = append(t.Partitions, rp)
		}
		if len(t.Partitions) > 0 || !all {
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp, nil
}

// everyPartition lists every partition of every topic, as a request.
func (s *Server) everyPartition() []kmsg.ElectLeadersRequestTopic {
	var out []kmsg.ElectLeadersRequestTopic
	for _, t := range s.broker.Topics() {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = t.Name()
		for _, p := range t.Partitions() {
			rt.Partitions = append(rt.Partitions, p.Index())
		}
		out = append(out, rt)
	}
	return out
}

// elect runs one partition's election of type typ (0 preferred, 1
// unclean).
func (s *Server) elect(ctx context.Context, typ int8, topic string, partition int32) error {
	t, err := s.broker.Topic(topic)
	if err != nil {
		return err
	}
	p, err := t.Partition(partition)
	if err != nil {
		return err
	}
	if typ == 0 {
		return p.ElectPreferredLeader(ctx)
	}
	if leader, _, _ := p.Leadership(s.broker.NodeID()); leader < 0 {
		return broker.ErrEligibleLeadersNotAvailable
	}
	return broker.ErrElectionNotNeeded
}
