package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments (key 46), v0.
//
// The reassignments in progress (AlterPartitionReassignments), of the
// partitions asked for (null topics: every one): the replicas as Kafka
// lists them during a move (the current ones, then those being added),
// the ones being added and the ones being removed. A single node never
// has one. It needs DESCRIBE on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleListPartitionReassignments(r *request, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.allowedCluster(r, opDescribe) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errClusterDenied), errorMessage(errClusterDenied)
		return resp, nil
	}
	if !s.broker.Clustered() {
		return resp, nil
	}
	asked := func(topic string, partition int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == topic && slices.Contains(t.Partitions, partition) {
				return true
			}
		}
		return false
	}
	for _, ra := range s.broker.Reassignments() {
		if !asked(ra.Topic, ra.Partition) {
			continue
		}
		p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		p.Partition = ra.Partition
		p.Replicas = slices.Clone(ra.Replicas)
		for _, id := range ra.Target {
			if !slices.Contains(ra.Replicas, id) {
				p.AddingReplicas = append(p.AddingReplicas, id)
				p.Replicas = append(p.Replicas, id)
			}
		}
		for _, id := range ra.Replicas {
			if !slices.Contains(ra.Target, id) {
				p.RemovingReplicas = append(p.RemovingReplicas, id)
			}
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != ra.Topic {
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic = ra.Topic
			resp.Topics = append(resp.Topics, t)
		}
		last := &resp.Topics[len(resp.Topics)-1]
		last.Partitions = append(last.Partitions, p)
	}
	return resp, nil
}
