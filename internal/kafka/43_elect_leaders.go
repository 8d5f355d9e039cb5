package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders (key 43), v0-v2.
//
// On a single node every partition's leader is already its preferred
// (and only) replica, so no election is needed: each partition asked for
// answers ELECTION_NOT_NEEDED (v1+; NONE in v0, which predates that
// code), an offline one ELIGIBLE_LEADERS_NOT_AVAILABLE, an unknown one
// UNKNOWN_TOPIC_OR_PARTITION. Null topics ask for every partition that
// needs an election: none. It needs ALTER on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleElectLeaders(r *request, req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	allowed := s.allowedCluster(r, opAlter)
	if !allowed && req.Version >= 1 {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, rt := range req.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			var err error
			switch {
			case !allowed:
				err = errClusterDenied
			default:
				err = s.electionNeeded(rt.Topic, p)
			}
			if errors.Is(err, errElectionNotNeeded) && req.Version == 0 {
				err = nil
			}
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

var errElectionNotNeeded = kafkaErrorf(kerr.ElectionNotNeeded, "Leader election not needed for topic partition")

// electionNeeded says why a partition's leader needs no election, or that
// there is no leader to elect.
func (s *Server) electionNeeded(topic string, partition int32) error {
	t, err := s.broker.Topic(topic)
	if err != nil {
		return err
	}
	p, err := t.Partition(partition)
	switch {
	case err != nil:
		return err
	case p.Offline() != nil:
		return kafkaErrorf(kerr.EligibleLeadersNotAvailable, "the partition's only replica is offline: %v", p.Offline())
	}
	return errElectionNotNeeded
}
