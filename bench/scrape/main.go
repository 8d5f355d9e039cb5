// Command scrape measures what Prometheus scraping costs a loaded broker:
// how long one scrape of /metrics (and /metrics/per-object) takes with
// many partitions and queues, the CPU and heap allocation it costs, and
// how much scraping moves the latency of acks=all produces, side by side
// with scraping off.
//
//	go run ./bench/scrape [-partitions 10000] [-queues 10000] [-duration 10s] [-runs 3] [-scrape-every 1s]
//
// The broker runs in-process with its default durability, its data in a
// temporary directory under -dir. Scrapes ask for gzip, as Prometheus
// does, and are not decompressed while measured. Produce latency is
// measured open loop: 1 KiB records at -rate per second to a topic of its
// own, each timed from Produce to its acknowledgement. Runs alternate off
// and on, -runs each; the report gives each run's p99 and the median of
// each quantile. See bench/README.md.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
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
	cpuProfile         string
	mutexProfile       string
}

func main() {
	var o options
	flag.IntVar(&o.partitions, "partitions", 10000, "partitions to create (in topics of 1,000)")
	flag.IntVar(&o.queues, "queues", 10000, "AMQP queues to declare")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each produce run")
	flag.IntVar(&o.runs, "runs", 3, "produce runs with scraping off, and as many with it on (0: time the scrapes only)")
	flag.IntVar(&o.rate, "rate", 2000, "records per second the producer sends")
	flag.DurationVar(&o.scrapeEvery, "scrape-every", time.Second, "scrape interval while scraping is on (Prometheus's default is 15s)")
	flag.StringVar(&o.dir, "dir", os.TempDir(), "directory for the broker's data")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements (after the objects are created) to this file")
	flag.StringVar(&o.mutexProfile, "mutexprofile", "", "write a mutex contention profile of the measurements to this file")
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
	stopProfiles, err := startProfiles(o)
	if err != nil {
		return err
	}
	defer stopProfiles()
	base := "http://" + n.HTTPAddr()
	fmt.Fprintf(out, "%d partitions, %d queues; GOMAXPROCS %d, load average %s\n\n", o.partitions, o.queues, runtime.GOMAXPROCS(0), loadAverage())
	fmt.Fprintf(out, "Five scrapes of each page, broker otherwise idle (CPU and allocation: the whole process's, per scrape)\n\n")
	fmt.Fprintf(out, "| scrape | median | slowest | CPU | allocated | size (gzip) | size |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, path := range []string{"/metrics", "/metrics/per-object"} {
		c, err := measureScrapes(base+path, 5)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "| %s | %v | %v | %v | %.1f MB | %.2f MB | %.1f MB |\n", path, c.wall[len(c.wall)/2].Round(time.Millisecond),
			c.wall[len(c.wall)-1].Round(time.Millisecond), c.cpu[len(c.cpu)/2].Round(time.Millisecond),
			float64(c.allocated[len(c.allocated)/2])/1e6, float64(c.wireSize)/1e6, float64(c.textSize)/1e6)
	}
	var off, on []produceResult
	for range o.runs {
		r, err := produceRun(ctx, cl, o, "")
		if err != nil {
			return err
		}
		off = append(off, r)
		if r, err = produceRun(ctx, cl, o, base+"/metrics"); err != nil {
			return err
		}
		on = append(on, r)
	}
	if o.runs > 0 {
		reportProduce(out, o, off, on)
	}
	return nil
}

// reportProduce prints each run's p99 (so the noise shows) and the median
// over runs of each quantile, with scraping off and on.
func reportProduce(out io.Writer, o options, off, on []produceResult) {
	fmt.Fprintf(out, "\nacks=all produce, 1 KiB at %d/s, %d runs of %v each way, alternating; scraping /metrics every %v (first at the start of the run)\n\n",
		o.rate, o.runs, o.duration, o.scrapeEvery)
	fmt.Fprintf(out, "| run | p99 off | p99 on | scrapes | scrape median |\n|---:|---:|---:|---:|---:|\n")
	for i := range off {
		fmt.Fprintf(out, "| %d | %v | %v | %d | %v |\n", i+1, round(off[i].latencies.quantile(.99)), round(on[i].latencies.quantile(.99)),
			len(on[i].scrapes), round(on[i].scrapes.quantile(.5)))
	}
	median := func(runs []produceResult, q float64) time.Duration {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = r.latencies.quantile(q)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Fprintf(out, "\nMedian over runs\n\n| scraping | p50 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|\n")
	for _, m := range []struct {
		name string
		runs []produceResult
	}{{"off", off}, {fmt.Sprintf("every %v", o.scrapeEvery), on}} {
		fmt.Fprintf(out, "| %s | %v | %v | %v | %v |\n", m.name, round(median(m.runs, .5)), round(median(m.runs, .99)),
			round(median(m.runs, .999)), round(median(m.runs, 1)))
	}
	fmt.Fprintf(out, "\np99 with scraping / without: %.2f (target ≤ 1.10)\n", float64(median(on, .99))/float64(median(off, .99)))
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

// loadAverage is the machine's one-minute load average, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	load, _, _ := strings.Cut(string(b), " ")
	return load
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

// scrapeCosts are what count scrapes of one page cost, each sorted, and
// the size of the last answer, gzipped as sent and as text.
type scrapeCosts struct {
	wall, cpu          []time.Duration
	allocated          []uint64
	wireSize, textSize int
}

// measureScrapes scrapes url count times, one after the other.
func measureScrapes(url string, count int) (scrapeCosts, error) {
	var c scrapeCosts
	var body []byte
	for range count {
		cpu, allocated, start := processCPU(), heapAllocated(), time.Now()
		b, err := scrapeOnce(url)
		if err != nil {
			return c, err
		}
		c.wall = append(c.wall, time.Since(start))
		c.cpu = append(c.cpu, processCPU()-cpu)
		c.allocated = append(c.allocated, heapAllocated()-allocated)
		body = b
	}
	slices.Sort(c.wall)
	slices.Sort(c.cpu)
	slices.Sort(c.allocated)
	c.wireSize = len(body)
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return c, fmt.Errorf("%s: %w", url, err)
	}
	text, err := io.ReadAll(zr)
	c.textSize = len(text)
	return c, err
}

// heapAllocated is the bytes the process has allocated on the heap.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// scrapeOnce gets url as Prometheus does, asking for gzip, and returns
// the body as sent. (Asking explicitly keeps Go's client from
// decompressing it in this process, which the broker shares.)
func scrapeOnce(url string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// produceResult is one produce run: each record's latency, and how long
// each scrape during it took.
type produceResult struct {
	latencies, scrapes latencies
}

// produceRun sends o.rate records per second for o.duration and times each
// from Produce to its acknowledgement, scraping scrapeURL meanwhile if it
// is set: at the start, then every o.scrapeEvery.
func produceRun(ctx context.Context, cl *kgo.Client, o options, scrapeURL string) (produceResult, error) {
	var res produceResult
	stop := make(chan struct{})
	var scraping sync.WaitGroup
	if scrapeURL != "" {
		scraping.Go(func() {
			tick := time.NewTicker(o.scrapeEvery)
			defer tick.Stop()
			for {
				start := time.Now()
				if _, err := scrapeOnce(scrapeURL); err == nil {
					res.scrapes = append(res.scrapes, time.Since(start))
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	var mu sync.Mutex
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
				res.latencies = append(res.latencies, time.Since(sent))
			})
		}
	}
	ticker.Stop()
	acked.Wait()
	close(stop)
	scraping.Wait()
	return res, firstErr
}

// startProfiles starts the profiles the options ask for; the function it
// returns stops them and writes them out.
func startProfiles(o options) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if o.mutexProfile != "" {
		runtime.SetMutexProfileFraction(1)
		stops = append(stops, func() { writeProfile("mutex", o.mutexProfile) })
	}
	return stop, nil
}

func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scrape:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "scrape:", err)
	}
}
