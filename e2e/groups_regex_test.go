package e2e

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupRegexMatchesInternalTopics is the Wharf counterpart of
// franz-go's Test848RegexBrokerResolves: a KIP-848 member that subscribes
// by regex is assigned every topic the broker finds matching, internal
// topics included, as Kafka's coordinator resolves a regex against every
// topic of the metadata image. franz-go sends its patterns as one
// unanchored regex, so a bare name also matches longer names.
func TestGroupRegexMatchesInternalTopics(t *testing.T) {
	n := startGroupNode(t)
	adm := newAdmin(t, n)
	regular := []string{"orders", "orders-v2"}
	for _, name := range regular {
		createTopic(t, adm, name, 1, nil)
	}
	producer := newFranz(t, n)
	for _, topic := range regular {
		produceSync(t, producer, &kgo.Record{Topic: topic, Value: []byte("v")})
	}
	const internal = "__consumer_offsets"

	var (
		mu       sync.Mutex
		assigned = map[string]bool{}
	)
	cl := newFranz(t, n,
		kgo.ServerSideBalancer(),
		kgo.ConsumerGroup("regex-internal"),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics("orders", regexp.QuoteMeta(internal)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.MetadataMinAge(100*time.Millisecond), // learn of assigned topics at once
		kgo.FetchMaxWait(250*time.Millisecond),   // polls return soon while the internal topic is empty
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for topic := range parts {
				assigned[topic] = true
			}
		}),
	)

	internalAssigned := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return assigned[internal]
	}

	ctx := testContext(t)
	seen := map[string]bool{}
	for !(seen["orders"] && seen["orders-v2"] && internalAssigned()) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachTopic(func(ft kgo.FetchTopic) {
			if len(ft.Records()) > 0 {
				seen[ft.Topic] = true
			}
		})
	}
	for _, topic := range regular {
		if !seen[topic] {
			t.Errorf("consumed nothing from %s", topic)
		}
	}
	if !internalAssigned() {
		t.Errorf("the broker did not assign %s to a regex that names it (assigned: %v)", internal, assigned)
	}
	if !slices.Contains(cl.GetConsumeTopics(), internal) {
		t.Errorf("%s is not among the consumed topics %v", internal, cl.GetConsumeTopics())
	}
}
