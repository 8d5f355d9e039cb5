package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/acl"
	"github.com/wharf-mq/wharf/internal/broker"
)

// Metadata (key 3), v0-v13.
//
// One broker (this node) leads every partition; replicas and ISR are just
// this node. A partition whose log is offline is reported with
// KAFKA_STORAGE_ERROR, this node as its offline replica and an empty ISR.
//
// Topics: null (v1+) or empty (v0) asks for all topics. A missing topic is
// created when the request allows it (always before v4, AllowAutoTopicCreation
// from v4) and the broker has auto.create.topics.enable; otherwise it is
// UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for a name Kafka
// would never accept. v10+ reports topic IDs; v12+ may ask by topic ID
// (unknown: UNKNOWN_TOPIC_ID). Authorized operations (v8+) report everything
// as allowed, since Wharf has no ACLs.

func (s *Server) handleMetadata(r *request, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = s.metadataBrokers(r.conn.listener)
	listed := make(map[int32]bool, len(resp.Brokers))
	for _, b := range resp.Brokers {
		listed[b.NodeID] = true
	}
	clusterID := s.broker.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = s.broker.Controller()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = s.authorizedOperations(r, kmsg.ACLResourceTypeCluster, acl.ClusterName, clusterOperations)
	}

	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if allTopics {
		for _, t := range s.broker.Topics() {
			if s.mayDo(r, opDescribe, resTopic, t.Name()) {
				resp.Topics = append(resp.Topics, s.metadataTopic(r, t, req, listed))
			}
		}
		return resp, nil
	}

	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		t, err := s.metadataLookup(r, rt, autoCreate)
		if err != nil {
			resp.Topics = append(resp.Topics, metadataTopicError(rt, err))
			continue
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(r, t, req, listed))
	}
	return resp, nil
}

// metadataLookup finds a requested topic, creating it when the request
// and the broker allow and the principal may.
func (s *Server) metadataLookup(r *request, rt kmsg.MetadataRequestTopic, autoCreate bool) (*broker.Topic, error) {
	if rt.Topic == nil {
		if rt.TopicID == [16]byte{} {
			return nil, errNoTopicNameOrID
		}
		t, err := s.broker.TopicByID(rt.TopicID)
		if err == nil && !s.allowed(r, opDescribe, resTopic, t.Name()) {
			return nil, errTopicDenied
		}
		return t, err
	}
	name := *rt.Topic
	if !s.allowed(r, opDescribe, resTopic, name) {
		return nil, errTopicDenied
	}
	t, err := s.broker.Topic(name)
	if !errors.Is(err, broker.ErrUnknownTopic) || !autoCreate || !s.broker.AutoCreatesTopics() || !validTopicName(name) {
		return t, err
	}
	if !s.mayCreateTopic(r, name) {
		return nil, errTopicDenied
	}
	if _, err := s.broker.TopicOrCreate(name); err != nil {
		return nil, err
	}
	// Kafka answers the request that auto-created a topic with
	// LEADER_NOT_AVAILABLE and no partitions, and the topic from the next
	// Metadata on; clients retry, and tests written against Kafka (kafka-go's
	// own) expect it.
	return nil, errTopicBeingCreated
}

// errTopicBeingCreated is the answer for a topic this Metadata request
// auto-created.
var errTopicBeingCreated = errors.New("topic created by this request")

// mayCreateTopic: CREATE on the cluster or on the topic, as Kafka asks
// of CreateTopics and of auto-creation.
func (s *Server) mayCreateTopic(r *request, name string) bool {
	return s.mayDo(r, opCreate, kmsg.ACLResourceTypeCluster, acl.ClusterName) || s.allowed(r, opCreate, resTopic, name)
}

var errNoTopicNameOrID = errors.New("topic has neither name nor ID")

// metadataBroker describes this node as clients of listener l should
// reach it.
func (s *Server) metadataBroker(l *Listener) kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = s.broker.NodeID()
	b.Host = l.AdvertisedHost
	b.Port = l.AdvertisedPort
	return b
}

// metadataTopic describes one existing topic and its partitions. A
// partition whose leader is not among the listed brokers (this node sees
// its node down: an election is due) is LEADER_NOT_AVAILABLE with no
// leader, as Kafka answers for a leader that is not alive: a client
// cannot reach a broker the response does not list, and franz-go fails a
// transactional produce to one ("unknown broker") rather than wait.
func (s *Server) metadataTopic(r *request, t *broker.Topic, req *kmsg.MetadataRequest, listed map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name()
	mt.Topic = &name
	mt.TopicID = t.ID()
	mt.IsInternal = t.Internal()
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = s.authorizedOperations(r, resTopic, name, topicOperations)
	}
	node := s.broker.NodeID()
	for _, p := range t.Partitions() {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index()
		mp.Leader, mp.LeaderEpoch, mp.ISR = p.Leadership(node)
		mp.Replicas = p.Replicas()
		if mp.Replicas == nil {
			mp.Replicas = []int32{node}
		}
		mp.OfflineReplicas = []int32{}
		switch {
		case p.Offline() != nil:
			mp.ErrorCode = kerr.KafkaStorageError.Code
			mp.ISR = []int32{}
			mp.OfflineReplicas = []int32{node}
		case mp.Leader < 0:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case !listed[mp.Leader]:
			mp.Leader, mp.ErrorCode = -1, kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// metadataTopicError answers a requested topic that cannot be described.
func metadataTopicError(rt kmsg.MetadataRequestTopic, err error) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = rt.Topic
	mt.TopicID = rt.TopicID
	mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	switch {
	case rt.Topic == nil && errors.Is(err, errNoTopicNameOrID):
		mt.ErrorCode = kerr.InvalidRequest.Code
	case rt.Topic == nil:
		mt.ErrorCode = kerr.UnknownTopicID.Code
	case errors.Is(err, broker.ErrUnknownTopic) && !validTopicName(*rt.Topic):
		mt.ErrorCode = kerr.InvalidTopicException.Code
	case errors.Is(err, errTopicBeingCreated):
		mt.ErrorCode = kerr.LeaderNotAvailable.Code
	default:
		mt.ErrorCode = errorCode(err)
	}
	return mt
}

// checkLeaderEpoch answers a request for partition p of this node (self):
// NOT_LEADER_OR_FOLLOWER unless this node leads it, then KIP-320 fencing
// for a CurrentLeaderEpoch sent by a client: -1 skips the check; the
// partition's epoch is its Raft term in a cluster, always 0 on a single
// node, where leadership never moves.
func checkLeaderEpoch(p *broker.Partition, self, epoch int32) int16 {
	if err := p.CheckLeader(); err != nil {
		return kerr.NotLeaderForPartition.Code
	}
	_, current, _ := p.Leadership(self)
	switch {
	case epoch < 0 || epoch == current:
		return 0
	case epoch > current:
		return kerr.UnknownLeaderEpoch.Code
	default:
		return kerr.FencedLeaderEpoch.Code
	}
}

// validTopicName is Kafka's topic name rule (1-249 characters of
// [a-zA-Z0-9._-], not "." or ".."). The broker enforces it on creation;
// Metadata needs it to tell a bad name from a missing topic.
func validTopicName(name string) bool {
	if len(name) == 0 || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
