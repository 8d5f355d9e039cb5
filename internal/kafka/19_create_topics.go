package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// CreateTopics (key 19), v0-v7.
//
// NumPartitions -1 takes the broker default (num.partitions); 0 or below -1
// is INVALID_PARTITIONS. ReplicationFactor -1 takes min(3, nodes); one
// above the node count (1 on a single node) is INVALID_REPLICATION_FACTOR,
// in Kafka's words. A manual
// ReplicaAssignment must have NumPartitions and ReplicationFactor -1, list
// partitions 0..n-1 and put each on exactly this node. A topic named twice
// in one request is INVALID_REQUEST. ValidateOnly (v1+) checks without
// creating. v5+ answers with the partition count, replication factor and
// configs of the new topic; v7+ with its ID.
//
// A topic needs CREATE on the cluster or on itself (else
// TOPIC_AUTHORIZATION_FAILED); its configs are shown only with
// DESCRIBE_CONFIGS on it (else TopicConfigErrorCode
// TOPIC_AUTHORIZATION_FAILED), as in Kafka.

func (s *Server) handleCreateTopics(r *request, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	counts := make(map[string]int)
	for _, rt := range req.Topics {
		counts[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case counts[rt.Topic] > 1:
			err = kafkaErrorf(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		case !s.mayCreateTopic(r, rt.Topic):
			err = errTopicDenied
		default:
			err = s.createTopic(rt, req.ValidateOnly, &st)
		}
		if err != nil {
			st.ErrorCode = errorCode(err)
			st.ErrorMessage = errorMessage(err)
		} else if !s.mayDo(r, opDescribeConfigs, resTopic, rt.Topic) {
			st.Configs, st.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// createTopic validates and creates one topic, filling st on success.
func (s *Server) createTopic(rt kmsg.CreateTopicsRequestTopic, validateOnly bool, st *kmsg.CreateTopicsResponseTopic) error {
	partitions, err := s.createTopicPartitions(rt)
	if err != nil {
		return err
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return kafkaErrorf(kerr.InvalidConfig, "null value for topic config %q", c.Name)
		}
		configs[c.Name] = *c.Value
	}

	t, err := s.broker.CreateTopic(broker.TopicSpec{Name: rt.Topic, Partitions: partitions, Configs: configs,
		ReplicationFactor: rt.ReplicationFactor}, validateOnly)
	if err != nil {
		return err
	}
	st.ReplicationFactor = 1
	if ps := t.Partitions(); len(ps) > 0 && len(ps[0].Replicas()) > 0 {
		st.ReplicationFactor = int16(len(ps[0].Replicas()))
	}
	st.Configs = createTopicsConfigs(t.Configs())
	if validateOnly {
		// The topic that would be created has no ID or partitions yet.
		st.NumPartitions = partitions
		if partitions <= 0 {
			st.NumPartitions = s.broker.DefaultPartitions()
		}
		return nil
	}
	st.TopicID = t.ID()
	st.NumPartitions = int32(len(t.Partitions()))
	return nil
}

// createTopicPartitions checks the partition count, replication factor and
// manual assignment, returning the count to create (0: broker default).
func (s *Server) createTopicPartitions(rt kmsg.CreateTopicsRequestTopic) (int32, error) {
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return 0, kafkaErrorf(kerr.InvalidRequest,
				"both numPartitions and replicationFactor must be -1 with a manual replica assignment")
		}
		return s.checkAssignment(rt.ReplicaAssignment)
	}
	switch rf, nodes := rt.ReplicationFactor, s.broker.NodeCount(); {
	case rf == 0 || rf < -1:
		return 0, kafkaErrorf(kerr.InvalidReplicationFactor, "replication factor must be larger than 0, or -1 to use the default")
	case int(rf) > nodes:
		return 0, kafkaErrorf(kerr.InvalidReplicationFactor,
			"Replication factor: %d larger than available brokers: %d.", rf, nodes)
	}
	switch n := rt.NumPartitions; {
	case n == -1:
		return 0, nil
	case n <= 0:
		return 0, kafkaErrorf(kerr.InvalidPartitions, "number of partitions must be larger than 0, or -1 to use the default")
	default:
		return n, nil
	}
}

// checkAssignment accepts a manual assignment that puts partitions 0..n-1
// each on this node alone.
func (s *Server) checkAssignment(assignment []kmsg.CreateTopicsRequestTopicReplicaAssignment) (int32, error) {
	seen := make(map[int32]bool, len(assignment))
	for _, a := range assignment {
		if a.Partition < 0 || int(a.Partition) >= len(assignment) || seen[a.Partition] {
			return 0, kafkaErrorf(kerr.InvalidReplicaAssignment, "partitions must be numbered 0..%d without gaps", len(assignment)-1)
		}
		seen[a.Partition] = true
		if len(a.Replicas) != 1 || a.Replicas[0] != s.broker.NodeID() {
			return 0, kafkaErrorf(kerr.InvalidReplicaAssignment,
				"partition %d: replicas %v; the only broker is %d", a.Partition, a.Replicas, s.broker.NodeID())
		}
	}
	return int32(len(assignment)), nil
}
