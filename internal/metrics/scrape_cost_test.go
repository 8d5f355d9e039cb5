package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestScrapeAllocatesLittlePerObject scrapes both pages of a node with
// 1,000 partitions and 1,000 queues and bounds the heap one scrape
// allocates (the whole process, client included) per object. Building a
// const metric, a dto.Metric and their label pairs per sample cost
// ~2.5 KB per object, and the garbage of a scrape of 10,000 of each
// triggered a collection whose assists and mark work landed on the
// produce path; written directly, a scrape allocates a few hundred bytes
// per queue (mq.QueueDetails) and nothing per partition.
func TestScrapeAllocatesLittlePerObject(t *testing.T) {
	if raceEnabled {
		// Under the race detector sync.Pool drops a random share of what
		// is put back, so a scrape refills its pools each time.
		t.Skip("a scrape's allocations are not what they are without the race detector")
	}
	const partitions, queues = 1000, 1000
	n := nodetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(kafkaClient(t, n)).CreateTopic(ctx, partitions, 1, nil, "many"); err != nil {
		t.Fatal(err)
	}
	ch := amqpChannel(t, n)
	for i := range queues {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q-%04d", i), false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	const perObjectLimit = 512 // bytes
	for _, page := range []string{"/metrics", "/metrics/per-object"} {
		url := nodetest.HTTPURL(n) + page
		getPage(t, url) // the first scrape fills the pools
		// The least of three: a scrape is what it allocates, not what
		// the node's background work allocates beside it.
		least := uint64(1 << 63)
		for range 3 {
			before := heapAllocated()
			getPage(t, url)
			least = min(least, heapAllocated()-before)
		}
		perObject := least / (partitions + queues)
		t.Logf("a scrape of %s allocates %d bytes per object (%d in all)", page, perObject, least)
		if perObject > perObjectLimit {
			t.Errorf("a scrape of %s allocates %d bytes per object (%d in all), want at most %d", page, perObject, least, perObjectLimit)
		}
	}
}

func getPage(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", url, resp.Status, err)
	}
}

func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
