// Command bench measures Wharf's Kafka produce and fetch throughput through
// franz-go beside the raw limits of the same machine, measured in the same
// run on the same disk, and prints one Markdown table.
//
//	go run ./bench [-duration 5s] [-runs 3] [-dir DIR] [-fill-mib 256]
//
// Every figure is the median of -runs runs of -duration each. See
// bench/README.md for what each figure means; `go test -bench . ./bench`
// runs the same workloads as Go benchmarks.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// Targets from the issue, as fractions of the baseline.
const (
	produceTarget = 0.60 // durable produce vs the raw disk figure
	fetchTarget   = 0.50 // warm-tail fetch vs loopback TCP
)

type options struct {
	duration   time.Duration
	runs       int
	dir        string
	fillMiB    int64
	cpuProfile string
	verbose    bool
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of each run")
	flag.IntVar(&o.runs, "runs", 3, "runs per figure; the table shows the median")
	flag.StringVar(&o.dir, "dir", os.TempDir(), "directory on the disk to measure; the broker's data and the baseline files go in a temporary directory under it")
	flag.Int64Var(&o.fillMiB, "fill-mib", 256, "MiB of records written to each fetch topic before the fetch runs")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the Wharf workloads (broker and clients) to this file")
	flag.BoolVar(&o.verbose, "v", false, "log the broker's warnings and errors to stderr")
	flag.Parse()
	if o.runs < 1 || o.duration <= 0 || o.fillMiB < 1 {
		fmt.Fprintln(os.Stderr, "bench: -runs, -duration and -fill-mib must be positive")
		os.Exit(2)
	}
	if err := run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options, out, progress io.Writer) error {
	work, err := os.MkdirTemp(o.dir, "wharf-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	logOut := io.Discard
	if o.verbose {
		logOut = progress
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))

	s := &session{opts: o, dir: work, progress: progress}
	fmt.Fprintf(progress, "bench: %d runs of %v per figure, data in %s, GOMAXPROCS=%d\n", o.runs, o.duration, work, runtime.GOMAXPROCS(0))

	loopback, err := s.median("loopback TCP", func() (result, error) { return loopbackTCP(forDuration(o.duration)) })
	if err != nil {
		return err
	}
	streaming, err := s.median("disk streaming", func() (result, error) { return diskStreaming(work, forDuration(o.duration)) })
	if err != nil {
		return err
	}

	w, err := startWharf(work+"/data", logger)
	if err != nil {
		return fmt.Errorf("start wharf: %w", err)
	}
	defer w.close()

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var rows []row
	var notes []string
	for _, partitions := range []int32{1, 8} {
		var (
			runs  []result
			stats []produceStats
		)
		for _, setup := range producerSetups {
			pr, st, err := s.produceMedian(w, partitions, setup)
			if err != nil {
				return err
			}
			runs = append(runs, pr)
			stats = append(stats, st)
		}
		// One per-batch disk baseline per partition count, in the batch
		// size of the default producer (every setup sends full 1 MB
		// batches under this load; the notes show each one's).
		chunk := stats[0].meanBatchBytes()
		var total int64
		for _, r := range runs {
			total = max(total, r.bytes)
		}
		perBatch, err := s.median(fmt.Sprintf("disk fdatasync per %s chunk", sizeString(chunk)), func() (result, error) {
			return diskFsyncPerChunk(work, total, chunk, 2*o.duration)
		})
		if err != nil {
			return err
		}
		grouped, err := s.median(fmt.Sprintf("disk group commit, %s chunks", sizeString(chunk)), func() (result, error) {
			r, _, err := diskGroupCommit(work, total, chunk, groupCommitInFlight, 2*o.duration)
			return r, err
		})
		if err != nil {
			return err
		}
		for i, setup := range producerSetups {
			name := fmt.Sprintf("produce acks=all, %d partition%s: %s", partitions, plural(partitions), setup.name)
			rows = append(rows, produceRows(name, runs[i], chunk, streaming, perBatch, grouped)...)
			notes = append(notes, fmt.Sprintf("%s: %s; median run sent %d batches (mean %s) in %d produce requests (mean %s).",
				name, stats[i].inFlight(setup), stats[i].batches, sizeString(stats[i].meanBatchBytes()), stats[i].requests, sizeString(stats[i].meanRequestBytes())))
		}
	}
	for _, partitions := range []int32{1, 8} {
		results, err := s.fetchMedians(w, partitions)
		if err != nil {
			return err
		}
		for i, setup := range consumerSetups {
			rows = append(rows, row{
				workload: fmt.Sprintf("fetch warm tail, %d partition%s: %s", partitions, plural(partitions), setup.name),
				wharf:    results[i], baseline: "loopback TCP (1 MiB writes)", base: loopback, target: fetchTarget,
			})
		}
	}
	notes = append(notes,
		fmt.Sprintf("Median of %d runs of %v each; records are 1 KiB values, uncompressed; MB = 10^6 bytes.", o.runs, o.duration),
		fmt.Sprintf("Broker in-process with its clients (GOMAXPROCS=%d, %s, %s/%s); data and baseline files on the same disk (%s).",
			runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, work),
		"Produce is judged against the fastest of its three disk baselines (marked stricter), so the ratio is the lowest one.",
		"Producers: franz-go keeps one produce request in flight per broker unless it produces idempotently (which needs InitProducerId) or is told otherwise. The 5-in-flight producer turns idempotence off; its cost is that a retried request can be reordered or duplicated.",
		"Consumers: franz-go decodes every record (CRC, varints, one Record each) on the same 2 cores; the minimal kmsg client reads every byte of every response but only walks batch headers, so it shows what the broker serves.",
	)
	writeTable(out, rows, notes)
	return nil
}

// session carries what every measurement needs.
type session struct {
	opts     options
	dir      string
	progress io.Writer
}

// median runs fn opts.runs times and returns the median run.
func (s *session) median(name string, fn func() (result, error)) (result, error) {
	runs := make([]result, 0, s.opts.runs)
	for i := range s.opts.runs {
		r, err := fn()
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(s.progress, "  %-60s run %d: %8.1f MB/s\n", name, i+1, r.mbps())
		runs = append(runs, r)
	}
	return runs[medianIndex(runs)], nil
}

// produceMedian produces to a fresh topic per run (deleted afterwards to
// free the disk) and returns the median run with its batch statistics.
func (s *session) produceMedian(w *wharf, partitions int32, setup producerSetup) (result, produceStats, error) {
	var runs []result
	var stats []produceStats
	for i := range s.opts.runs {
		topic := fmt.Sprintf("bench-produce-%dp-%d", partitions, i)
		if err := w.createTopic(topic, partitions); err != nil {
			return result{}, produceStats{}, err
		}
		r, st, err := produce(w.addr, topic, setup, forDuration(s.opts.duration), nil)
		if err != nil {
			return result{}, produceStats{}, fmt.Errorf("produce to %s (%s): %w", topic, setup.name, err)
		}
		fmt.Fprintf(s.progress, "  %-40s run %d: %8.1f MB/s %9.0f records/s, mean batch %s, mean request %s (%s)\n",
			fmt.Sprintf("produce %d partition(s)", partitions), i+1, r.mbps(), r.recordsPerSec(),
			sizeString(st.meanBatchBytes()), sizeString(st.meanRequestBytes()), setup.name)
		if err := w.deleteTopic(topic); err != nil {
			fmt.Fprintf(s.progress, "  (could not delete %s: %v)\n", topic, err)
		}
		runs = append(runs, r)
		stats = append(stats, st)
	}
	m := medianIndex(runs)
	return runs[m], stats[m], nil
}

// fetchMedians fills a topic, reads it once to warm everything up, then
// returns the median of the measured reads for each consumer setup.
func (s *session) fetchMedians(w *wharf, partitions int32) ([]result, error) {
	topic := fmt.Sprintf("bench-fetch-%dp", partitions)
	if err := w.createTopic(topic, partitions); err != nil {
		return nil, err
	}
	fmt.Fprintf(s.progress, "  filling %s with %d MiB\n", topic, s.opts.fillMiB)
	if err := prefill(w.addr, topic, s.opts.fillMiB<<20); err != nil {
		return nil, fmt.Errorf("fill %s: %w", topic, err)
	}
	ends, err := w.endOffsets(topic)
	if err != nil {
		return nil, err
	}
	if _, err := fetch(w.addr, topic, ends, nil, forRecords(totalRecords(ends))); err != nil {
		return nil, fmt.Errorf("warm-up read of %s: %w", topic, err)
	}
	var results []result
	for _, setup := range consumerSetups {
		r, err := s.median(fmt.Sprintf("fetch %d partition(s), %s", partitions, setup.name), func() (result, error) {
			return readTopic(w.addr, topic, ends, setup, forDuration(s.opts.duration))
		})
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	if err := w.deleteTopic(topic); err != nil {
		fmt.Fprintf(s.progress, "  (could not delete %s: %v)\n", topic, err)
	}
	return results, nil
}

// produceRows shows a produce result beside each disk baseline (streaming,
// fdatasync per batch, group commit); the target applies to the fastest,
// which is the strictest comparison, shown first.
func produceRows(name string, wharf result, chunk int64, streaming, perBatch, grouped result) []row {
	rows := []row{
		{workload: name, wharf: wharf, base: streaming,
			baseline: "disk streaming (1 MiB writes, fdatasync every 64 MiB)"},
		{workload: name, wharf: wharf, base: perBatch,
			baseline: fmt.Sprintf("disk write + fdatasync per %s (mean batch)", sizeString(chunk))},
		{workload: name, wharf: wharf, base: grouped,
			baseline: fmt.Sprintf("disk group commit, %s writes, %d in flight (mean batch)", sizeString(chunk), groupCommitInFlight)},
	}
	strict := 0
	for i := range rows {
		if rows[i].base.mbps() > rows[strict].base.mbps() {
			strict = i
		}
	}
	rows[strict].target = produceTarget
	rows[strict].baseline += " — stricter"
	rows[0], rows[strict] = rows[strict], rows[0]
	return rows
}

func totalRecords(ends map[int32]int64) int64 {
	var n int64
	for _, end := range ends {
		n += end
	}
	return n
}

func plural(n int32) string {
	if n == 1 {
		return ""
	}
	return "s"
}
