package kafka

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/quota"
)

// withQuotas gives the server a quota manager over its broker's
// definition store.
func withQuotas(t *testing.T) serverOption {
	return withServer(func(s *Server) {
		q, err := quota.Open(s.broker.Definitions())
		if err != nil {
			t.Fatal(err)
		}
		s.cfg.Quotas = q
	})
}

// TestProduceOverQuotaIsThrottledAndMuted (KIP-219): a produce past the
// client's producer_byte_rate is answered at once with throttle_time_ms,
// and the connection serves nothing more until that time has passed.
func TestProduceOverQuotaIsThrottledAndMuted(t *testing.T) {
	ts := startServer(t, withQuotas(t))
	ts.createTopic(t, "metered", 1, nil)
	ctx := testCtx(t)
	adm := ts.admin(t)
	// 10,000 B/s for client id "meter"; 110 KB measured over Kafka's
	// 10 s minimum span is 11,000 B/s: 10% over, a 1 s throttle.
	_, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kmsg.StringPtr("wharf-test")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10000}},
	}})
	if err != nil {
		t.Fatal(err)
	}

	c := ts.dial(t)
	first := c.roundTrip(produceReq(t, "metered", 0, -1, strings.Repeat("x", 110_000))).(*kmsg.ProduceResponse)
	if first.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(first.Topics[0].Partitions[0].ErrorCode))
	}
	throttle := time.Duration(first.ThrottleMillis) * time.Millisecond
	if throttle < 900*time.Millisecond || throttle > 1100*time.Millisecond {
		t.Fatalf("throttle_time_ms %d, want about 1000", first.ThrottleMillis)
	}
	sent := time.Now()
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
	if waited := time.Since(sent); waited < throttle-100*time.Millisecond {
		t.Fatalf("the next request was served after %v, during the %v throttle", waited, throttle)
	}

	// Another client id has no quota.
	other := ts.dial(t)
	req := produceReq(t, "metered", 0, -1, strings.Repeat("y", 110_000))
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("unmetered")).AppendRequest(nil, req, 1)
	other.write(frame)
	if resp := other.recv(req, 1).(*kmsg.ProduceResponse); resp.ThrottleMillis != 0 {
		t.Fatalf("a client without a quota was throttled %d ms", resp.ThrottleMillis)
	}
}

// TestClientQuotaAPIs: set, describe with filters, remove, and Kafka's
// validation.
func TestClientQuotaAPIs(t *testing.T) {
	ts := startServer(t, withQuotas(t))
	ctx := testCtx(t)
	adm := ts.admin(t)
	entries := []kadm.AlterClientQuotaEntry{
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("alice")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}, {Key: "request_percentage", Value: 25}}},
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user"}, {Type: "client-id", Name: kmsg.StringPtr("app")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2 << 20}}},
	}
	results, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("alter %+v: %v", r.Entity, r.Err)
		}
	}
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}})
	if err != nil || len(described) != 2 {
		t.Fatalf("every user entity: %v %+v", err, described)
	}
	strict, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr("alice")}})
	if err != nil || len(strict) != 1 || len(strict[0].Values) != 2 {
		t.Fatalf("alice alone: %v %+v", err, strict)
	}

	// Removing every key removes the entity.
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entries[0].Entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	if all, _ := adm.DescribeClientQuotas(ctx, false, nil); len(all) != 1 {
		t.Fatalf("after removing alice's quotas: %+v", all)
	}

	for _, bad := range []kadm.AlterClientQuotaEntry{
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("a")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "bogus", Value: 1}}},
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("a")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "group", Name: kmsg.StringPtr("a")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
	} {
		results, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{bad})
		if err != nil || len(results) != 1 || !errors.Is(results[0].Err, kerr.InvalidRequest) {
			t.Errorf("%+v: %v %+v, want INVALID_REQUEST", bad, err, results)
		}
	}
}

// TestFetchOverQuotaIsThrottled: consumer_byte_rate counts the bytes a
// fetch returns.
func TestFetchOverQuotaIsThrottled(t *testing.T) {
	ts := startServer(t, withQuotas(t))
	ts.createTopic(t, "metered", 1, nil)
	c := ts.dial(t)
	c.roundTrip(produceReq(t, "metered", 0, -1, strings.Repeat("x", 110_000)))
	if err := ts.s.cfg.Quotas.Alter(quota.Entity{User: quota.Named("ANONYMOUS")},
		map[string]float64{quota.ConsumerByteRate: 10000}, nil, false); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = 12, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "metered"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	if len(resp.Topics[0].Partitions[0].RecordBatches) < 110_000 || resp.ThrottleMillis < 900 {
		t.Fatalf("fetch of %d bytes throttled %d ms, want about 1000", len(resp.Topics[0].Partitions[0].RecordBatches), resp.ThrottleMillis)
	}
}
