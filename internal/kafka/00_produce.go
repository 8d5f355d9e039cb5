package kafka

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

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
// by ID (unknown: UNKNOWN_TOPIC_ID). Batches of idempotent producers are
// deduplicated by the partition; a transactional batch is first verified
// with the transaction coordinator (KIP-890 part 1, verifyTxnProduce): its
// partition must be in the producer's open transaction. Internal topics accept writes only from the client ID
// "__admin_client", as in Kafka. A failed partition answers BaseOffset -1.
// TimeoutMillis is not needed: nothing waits on replicas.
//
// Authorization: WRITE on the transactional id of a transactional
// request (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
// and WRITE on each topic (else TOPIC_AUTHORIZATION_FAILED, whether or not
// the topic exists).
//
// A connection may have several acks!=0 produce requests in flight
// (conn.go); planProduce and produceOrder keep their appends to any one
// partition in request order. The records are borrowed from the request
// frame, which the connection recycles once the response is written:
// nothing here keeps them after the append returns.

func (s *Server) handleProduce(r *request, req *kmsg.ProduceRequest) (*response, error) {
	plan := s.planProduce(r, req)
	plan.run()
	return plan.response(), nil
}

// producePlan is a produce request resolved against the broker, with its
// response filled in except for what the appends report.
type producePlan struct {
	req     *kmsg.ProduceRequest
	resp    *kmsg.ProduceResponse
	appends []produceAppend
}

// planProduce resolves every partition of req and prepares its response
// slot, so that the appends can run concurrently, each writing only its own
// slot.
func (s *Server) planProduce(r *request, req *kmsg.ProduceRequest) *producePlan {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	validAcks := req.Acks == -1 || req.Acks == 0 || req.Acks == 1
	txnDenied := req.TransactionID != nil && !s.allowed(r, opWrite, resTxnID, *req.TransactionID)
	plan := &producePlan{req: req, resp: resp}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))

		t, topicErr := s.produceTopic(r, req.Version, rt)
		switch {
		case txnDenied:
			topicErr = kerr.TransactionalIDAuthorizationFailed.Code
		case topicErr == 0 && t.Internal() && r.header.clientID != adminClientID:
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
				var guard *broker.TxnGuard
				if err == nil {
					// A verification another node answers is bounded by
					// txn.VerifyTimeout.
					guard, err = s.verifyTxnProduce(context.Background(), req.TransactionID, t.Name(), p, rp.Records)
				}
				if err != nil {
					sp.ErrorCode = errorCode(err)
					sp.ErrorMessage = errorMessage(err)
					continue
				}
				plan.appends = append(plan.appends, produceAppend{
					p: p, topic: t.Name(), records: rp.Records, guard: guard, out: sp,
				})
			}
		}
	}
	return plan
}

// response is the produce response once run has returned.
func (plan *producePlan) response() *response {
	if plan.req.Acks == 0 {
		return &response{closeConn: produceFailed(plan.resp)}
	}
	return &response{msg: plan.resp}
}

// adminClientID is the client ID Kafka lets write to internal topics.
const adminClientID = "__admin_client"

// produceTopic resolves a produce request's topic by name (v3-v12) or ID
// (v13+) and checks that r may write to it, returning the partition
// error code when it cannot.
func (s *Server) produceTopic(r *request, version int16, rt kmsg.ProduceRequestTopic) (*broker.Topic, int16) {
	if version >= 13 {
		t, err := s.broker.TopicByID(rt.TopicID)
		switch {
		case err != nil:
			return nil, kerr.UnknownTopicID.Code
		case !s.allowed(r, opWrite, resTopic, t.Name()):
			return nil, kerr.TopicAuthorizationFailed.Code
		}
		return t, 0
	}
	if !s.allowed(r, opWrite, resTopic, rt.Topic) {
		return nil, kerr.TopicAuthorizationFailed.Code
	}
	t, err := s.broker.Topic(rt.Topic)
	if err != nil {
		return nil, errorCode(err)
	}
	return t, 0
}

// produceAppend is one partition's share of a produce request.
type produceAppend struct {
	p       *broker.Partition
	topic   string
	records []byte
	guard   *broker.TxnGuard // a verified transactional batch's (verifyTxnProduce)
	out     *kmsg.ProduceResponseTopicPartition

	// after, if not nil, is closed when the previous in-flight request of
	// the same connection has appended to p; done is closed when this
	// append has. Both nil for a request handled alone.
	after <-chan struct{}
	done  chan struct{}
}

// run appends every partition's records, concurrently when there is more
// than one, and fills in each response slot.
func (plan *producePlan) run() {
	acks := plan.req.Acks
	ctx := context.Background()
	if timeout := plan.req.TimeoutMillis; timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeout)*time.Millisecond)
		defer cancel()
	}
	if len(plan.appends) == 1 {
		plan.appends[0].run(ctx, acks)
		return
	}
	var wg sync.WaitGroup
	for i := range plan.appends {
		wg.Go(func() { plan.appends[i].run(ctx, acks) })
	}
	wg.Wait()
}

// testHookBeforeAppend, if set, runs before each partition append (after
// its turn has come), so a test can hold one request's append back.
var testHookBeforeAppend atomic.Pointer[func(topic string, partition int32)]

// run appends a's records and waits for their acknowledgement until ctx
// ends.
func (a *produceAppend) run(ctx context.Context, acks int16) {
	// done is closed once this append is in the log (or has failed), and
	// at the latest when run returns.
	var releaseOnce sync.Once
	release := func() {
		if a.done != nil {
			releaseOnce.Do(func() { close(a.done) })
		}
	}
	defer release()
	if a.after != nil {
		<-a.after
	}
	if hook := testHookBeforeAppend.Load(); hook != nil {
		(*hook)(a.topic, a.p.Index())
	}
	// The next in-flight request's append to this partition may go in
	// as soon as this one is in the log; the durability waits of a
	// connection's requests then share fsyncs (group commit).
	res, err := a.append(acks)
	release()
	if err == nil {
		err = res.Wait(ctx)
	}
	a.out.LogStartOffset = a.p.StartOffset()
	if err != nil {
		a.out.ErrorCode = errorCode(err)
		a.out.ErrorMessage = errorMessage(err)
		return
	}
	a.out.BaseOffset = res.BaseOffset
	a.out.LogAppendTime = res.LogAppendTime
}

// append appends a's records, checked against the guard of their
// verification if they had one.
func (a *produceAppend) append(acks int16) (broker.Produced, error) {
	if a.guard != nil {
		return a.p.AppendVerified(a.records, acks, *a.guard)
	}
	return a.p.Append(a.records, acks)
}

// produceOrder is one connection's record of the latest in-flight append to
// each partition. Only the connection's reading goroutine uses it, in
// request order.
type produceOrder struct {
	last map[*broker.Partition]chan struct{}
}

// sequence chains plan's appends after those of the requests registered
// before it on the same partitions.
func (o *produceOrder) sequence(plan *producePlan) {
	if o.last == nil {
		o.last = make(map[*broker.Partition]chan struct{})
	}
	for i := range plan.appends {
		a := &plan.appends[i]
		a.after = o.last[a.p] // nil for the first: nothing to wait for
		a.done = make(chan struct{})
		o.last[a.p] = a.done
	}
}

// reset forgets every partition; only valid when no request is in flight
// (every registered append has finished).
func (o *produceOrder) reset() { clear(o.last) }

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
