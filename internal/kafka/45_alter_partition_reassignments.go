package kafka

import (
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// AlterPartitionReassignments (key 45), v0-v1.
//
// In a cluster each partition moves to its new replicas through its own
// Raft group (broker/reassign.go), in the background: the answer says
// the reassignment is recorded, ListPartitionReassignments shows it
// until it is done, and null replicas cancel it (back to the replicas
// the partition had). A single node's partitions can only stay where
// they are: a reassignment to this node alone succeeds and changes
// nothing; any other replica list is INVALID_REPLICA_ASSIGNMENT with
// Kafka's messages, and cancelling is NO_REASSIGNMENT_IN_PROGRESS. An
// unknown partition is UNKNOWN_TOPIC_OR_PARTITION. It needs ALTER on the
// cluster (else CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleAlterPartitionReassignments(r *request, req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !s.allowedCluster(r, opAlter) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errClusterDenied), errorMessage(errClusterDenied)
		return resp, nil
	}
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			err := s.reassign(rt.Topic, rp.Partition, rp.Replicas)
			p.ErrorCode, p.ErrorMessage = errorCode(err), errorMessage(err)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// reassign checks a reassignment of one partition to replicas (nil:
// cancel one in progress).
func (s *Server) reassign(topic string, partition int32, replicas []int32) error {
	t, err := s.broker.Topic(topic)
	if err == nil {
		_, err = t.Partition(partition)
	}
	switch {
	case err != nil:
		return err
	case replicas != nil && len(replicas) == 0:
		return kafkaErrorf(kerr.InvalidReplicaAssignment, "Empty replica list specified in partition reassignment.")
	case len(slices.Compact(slices.Sorted(slices.Values(replicas)))) != len(replicas):
		return kafkaErrorf(kerr.InvalidReplicaAssignment, "Duplicate replica ids in partition reassignment replica list: %v", replicas)
	}
	if s.broker.Clustered() {
		return reassignError(s.broker.Reassign(topic, partition, replicas))
	}
	if replicas == nil {
		return kafkaErrorf(kerr.NoReassignmentInProgress, "No ongoing reassignment for topic partition %s-%d", topic, partition)
	}
	for _, id := range replicas {
		if id != s.broker.NodeID() {
			return kafkaErrorf(kerr.InvalidReplicaAssignment,
				"The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
	}
	return nil
}

// reassignError gives the broker's refusals of a reassignment Kafka's
// codes.
func reassignError(err error) error {
	for sentinel, code := range map[error]*kerr.Error{
		broker.ErrUnknownNode:              kerr.InvalidReplicaAssignment,
		broker.ErrNoReassignmentInProgress: kerr.NoReassignmentInProgress,
	} {
		if errors.Is(err, sentinel) {
			return kafkaErrorf(code, "%s", strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
		}
	}
	return err
}
