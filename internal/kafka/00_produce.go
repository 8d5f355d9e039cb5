package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// Produce (key 0), v3-v13.
//
// Each partition's records go to Partition.Produce, which validates the
// batches and appends them (for acks=-1 waiting for the fsync). Partitions
// of one request are appended concurrently, so the fsyncs of an acks=all
// request to many partitions overlap and group-commit with other producers.
//
// acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). With acks=0 nothing
// is written back; if any partition failed the connection is closed, as
// Kafka does, so the producer refreshes its metadata. v13 addresses topics
// by ID (unknown: UNKNOWN_TOPIC_ID). Transactions and idempotence are not
// implemented (InitProducerId is not advertised, so clients produce without
// a producer ID). Internal topics accept writes only from the client ID
// "__admin_client", as in Kafka. A failed partition answers BaseOffset -1.
// TimeoutMillis is not needed: nothing waits on replicas.

func (s *Server) handleProduce(r *request, req *kmsg.ProduceRequest) (*response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	validAcks := req.Acks == -1 || req.Acks == 0 || req.Acks == 1

	// Resolve every partition first so the appends below can run
	// concurrently, each writing only its own response slot.
	var appends []produceAppend
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))

		t, topicErr := s.produceTopic(req.Version, rt)
		if topicErr == 0 && t.Internal() && r.header.clientID != adminClientID {
			topicErr = kerr.InvalidTopicException.Code
		}
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1 // until the append succeeds
			switch {
			case !validAcks:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case topicErr != 0:
				sp.ErrorCode = topicErr
			default:
				p, err := t.Partition(rp.Partition)
				if err != nil {
					sp.ErrorCode = errorCode(err)
					continue
				}
				appends = append(appends, produceAppend{p: p, records: rp.Records, out: sp})
			}
		}
	}

	runAppends(appends, req.Acks)

	if req.Acks == 0 {
		return &response{closeConn: produceFailed(resp)}, nil
	}
	return &response{msg: resp}, nil
}

// adminClientID is the client ID Kafka lets write to internal topics.
const adminClientID = "__admin_client"

// produceTopic resolves a produce request's topic by name (v3-v12) or ID
// (v13+), returning the partition error code when it cannot.
func (s *Server) produceTopic(version int16, rt kmsg.ProduceRequestTopic) (*broker.Topic, int16) {
	var (
		t   *broker.Topic
		err error
	)
	if version >= 13 {
		t, err = s.broker.TopicByID(rt.TopicID)
		if err != nil {
			return nil, kerr.UnknownTopicID.Code
		}
		return t, 0
	}
	t, err = s.broker.Topic(rt.Topic)
	if err != nil {
		return nil, errorCode(err)
	}
	return t, 0
}

// produceAppend is one partition's share of a produce request.
type produceAppend struct {
	p       *broker.Partition
	records []byte
	out     *kmsg.ProduceResponseTopicPartition
}

// runAppends appends every partition's records, concurrently when there is
// more than one, and fills in each response slot.
func runAppends(appends []produceAppend, acks int16) {
	if len(appends) == 1 {
		appends[0].run(acks)
		return
	}
	var wg sync.WaitGroup
	for i := range appends {
		wg.Go(func() { appends[i].run(acks) })
	}
	wg.Wait()
}

func (a *produceAppend) run(acks int16) {
	base, appendTime, err := a.p.Produce(a.records, acks)
	a.out.LogStartOffset = a.p.StartOffset()
	if err != nil {
		a.out.ErrorCode = errorCode(err)
		a.out.ErrorMessage = errorMessage(err)
		return
	}
	a.out.BaseOffset = base
	a.out.LogAppendTime = appendTime
}

// produceFailed reports whether any partition of resp has an error.
func produceFailed(resp *kmsg.ProduceResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}
