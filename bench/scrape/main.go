// Command scrape measures what Prometheus scraping costs a loaded broker:
// how long one scrape of /metrics (and /metrics/per-object) takes with
// many partitions and queues, and how much scraping moves the latency of
// acks=all produces, side by side with scraping off.
//
//	go run ./bench/scrape [-partitions 10000] [-queues 10000] [-duration 10s] [-runs 3] [-scrape-every 1s]
//
// The broker runs in-process with its default durability, its data in a
// temporary directory under -dir. Produce latency is measured open loop:
// 1 KiB records at -rate per second to a topic of its own, each timed from
// Produce to its acknowledgement. Runs alternate off and on, -runs each;
// the report gives the median of each. See bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
)

type options struct {
	partitions, queues int
	duration           time.Duration
	runs               int
	rate               int
	scrapeEvery        time.Duration
	dir                string
}

func main() {
	var o options
	flag.IntVar(&o.partitions, "partitions", 10000, "partitions to create (in topics of 1,000)")
	flag.IntVar(&o.queues, "queues", 10000, "AMQP queues to declare")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each produce run")
	flag.IntVar(&o.runs, "runs", 3, "produce runs with scraping off, and as many with it on")
	flag.IntVar(&o.rate, "rate", 2000, "records per second the producer sends")
	flag.DurationVar(&o.scrapeEvery, "scrape-every", time.Second, "scrape interval while scraping is on (Prometheus's default is 15s)")
	flag.StringVar(&o.dir, "dir", os.TempDir(), "directory for the broker's data")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scrape:", err)
		os.Exit(1)
	}
}

func run(o options, out io.Writer) error {
	dir, err := os.MkdirTemp(o.dir, "wharf-scrape-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	n, err := node.Start(node.Config{DataDir: dir, KafkaAddr: "127.0.0.1:0", AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer n.Close(context.Background())
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("latency"), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := populate(ctx, o, n, kadm.NewClient(cl)); err != nil {
		return err
	}
	metrics := "http://" + n.HTTPAddr() + "/metrics"
	fmt.Fprintf(out, "%d partitions, %d queues\n\n| scrape | median | slowest | size |\n|---|---:|---:|---:|\n", o.partitions, o.queues)
	for _, url := range []string{metrics, metrics + "/per-object"} {
		took, size, err := timeScrapes(url, 5)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "| %s | %v | %v | %.1f MB |\n", url[len("http://"+n.HTTPAddr()):], took[len(took)/2].Round(time.Millisecond),
			took[len(took)-1].Round(time.Millisecond), float64(size)/1e6)
	}
	var off, on []latencies
	for range o.runs {
		l, err := produceRun(ctx, cl, o, "")
		if err != nil {
			return err
		}
		off = append(off, l)
		if l, err = produceRun(ctx, cl, o, metrics); err != nil {
			return err
		}
		on = append(on, l)
	}
	p := func(runs []latencies, q float64) time.Duration {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = r.quantile(q)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Fprintf(out, "\nacks=all produce, 1 KiB at %d/s, median of %d runs of %v\n\n| scraping | p50 | p99 |\n|---|---:|---:|\n", o.rate, o.runs, o.duration)
	fmt.Fprintf(out, "| off | %v | %v |\n| every %v | %v | %v |\n", p(off, .5), p(off, .99), o.scrapeEvery, p(on, .5), p(on, .99))
	fmt.Fprintf(out, "\np99 with scraping / without: %.2f (target ≤ 1.10)\n", float64(p(on, .99))/float64(p(off, .99)))
	return nil
}

// populate creates the partitions (topics of 1,000), the latency topic and
// the queues, as clients would.
func populate(ctx context.Context, o options, n *node.Node, adm *kadm.Client) error {
	for i := 0; i*1000 < o.partitions; i++ {
		count := min(1000, o.partitions-i*1000)
		if _, err := adm.CreateTopic(ctx, int32(count), 1, nil, fmt.Sprintf("load-%02d", i)); err != nil {
			return err
		}
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "latency"); err != nil {
		return err
	}
	conn, err := amqp.Dial("amqp://guest:guest@" + n.AMQPAddr() + "/")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	for i := range o.queues {
		if _, err := ch.QueueDeclare(fmt.Sprintf("load-%05d", i), false, false, false, false, nil); err != nil {
			return err
		}
	}
	return nil
}

// timeScrapes scrapes url count times, and returns the durations, sorted,
// and the size of the last answer.
func timeScrapes(url string, count int) ([]time.Duration, int64, error) {
	var took []time.Duration
	var size int64
	for range count {
		start := time.Now()
		n, err := scrapeOnce(url)
		if err != nil {
			return nil, 0, err
		}
		took, size = append(took, time.Since(start)), n
	}
	slices.Sort(took)
	return took, size, nil
}

func scrapeOnce(url string) (int64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.Copy(io.Discard, resp.Body)
}

type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// produceRun sends o.rate records per second for o.duration and times each
// from Produce to its acknowledgement, scraping scrapeURL every
// o.scrapeEvery meanwhile if it is set.
func produceRun(ctx context.Context, cl *kgo.Client, o options, scrapeURL string) (latencies, error) {
	stop := make(chan struct{})
	var scraping sync.WaitGroup
	if scrapeURL != "" {
		scraping.Go(func() {
			tick := time.NewTicker(o.scrapeEvery)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					scrapeOnce(scrapeURL)
				}
			}
		})
	}
	var mu sync.Mutex
	var lat latencies
	var firstErr error
	var acked sync.WaitGroup
	value := make([]byte, 1024)
	const tick = 10 * time.Millisecond
	perTick := max(1, o.rate*int(tick)/int(time.Second))
	ticker := time.NewTicker(tick)
	for end := time.Now().Add(o.duration); time.Now().Before(end); <-ticker.C {
		for range perTick {
			sent := time.Now()
			acked.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				defer acked.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, time.Since(sent))
			})
		}
	}
	ticker.Stop()
	acked.Wait()
	close(stop)
	scraping.Wait()
	return lat, firstErr
}
