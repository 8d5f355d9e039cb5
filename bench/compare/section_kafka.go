package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Default cells of the produce matrix; -full runs every combination.
var (
	produceAllKiB = produceSpec{acksAll: true, recordSize: 1024, partitions: 1, producers: 1}
	produceOneKiB = produceSpec{acksAll: false, recordSize: 1024, partitions: 1, producers: 1}
	produceSmall  = produceSpec{acksAll: true, recordSize: 100, partitions: 16, producers: 4}
)

// produceMatrix is the produce cells to run.
func (s *suite) produceMatrix() []produceSpec {
	if !s.opts.full {
		return []produceSpec{produceAllKiB, produceOneKiB, produceSmall}
	}
	var all []produceSpec
	for _, acksAll := range []bool{true, false} {
		for _, size := range []int{1024, 100} {
			for _, parts := range []int32{1, 16} {
				for _, producers := range []int{1, 4} {
					all = append(all, produceSpec{acksAll: acksAll, recordSize: size, partitions: parts, producers: producers})
				}
			}
		}
	}
	return all
}

// latencyRates are the offered loads of the end-to-end latency rows.
func (s *suite) latencyRates() []int {
	if s.opts.full {
		return []int{10_000, 50_000}
	}
	return []int{10_000}
}

// kafkaSection runs the Kafka workloads against Wharf and kfake: acks=all
// workloads against kfake with SyncWrites (it fsyncs every batch before
// answering, as Wharf fsyncs before an acks=all reply), acks=1 workloads
// against kfake without it (page cache, as Wharf's acks=1).
func (s *suite) kafkaSection(ctx context.Context) error {
	peers := map[kfakeMode]*kfakeServer{}
	var skip string
	for _, mode := range []kfakeMode{kfakeSynced, kfakeCached} {
		k, err := s.startKfake(ctx, mode, filepath.Join(s.work, "kfake-"+fmt.Sprint(mode.sync)))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			skip = "kfake did not start: " + err.Error()
			s.skipped = append(s.skipped, "kfake: "+skip)
			break
		}
		peers[mode] = k
		defer func() {
			s.procs.forget(k.child)
			if err := k.terminate(time.Minute); err != nil {
				s.logf("stopping kfake: %v", err)
			}
		}()
	}
	bare, bareErr := s.startBareKafka(ctx, filepath.Join(s.work, "bare-kafka"))
	if bareErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.skipped = append(s.skipped, bareKafkaName+" did not start: "+bareErr.Error())
	} else {
		defer func() {
			s.procs.forget(bare.child)
			if err := bare.terminate(time.Minute); err != nil {
				s.logf("stopping %s: %v", bareKafkaName, err)
			}
		}()
	}
	if skip == "" {
		s.addVersion("kfake (github.com/twmb/franz-go/pkg/kfake) " + moduleVersion("github.com/twmb/franz-go/pkg/kfake") +
			", franz-go's test double (made to run inside a test, not a production broker), one broker in its own process here: one goroutine handles every request; " +
			"appends every batch to segment files in its data directory and reads fetched batches back from them, keeping a per-batch index in memory; " +
			"with SyncWrites, fsyncs the segment and the index file after every batch (two full fsyncs, no group commit)")
	}
	s.addVersion("Kafka client: franz-go " + moduleVersion("github.com/twmb/franz-go"))
	peerFor := func(acksAll bool, run func(ctx context.Context, addr string) (figures, error)) *contender {
		mode := kfakeCached
		if acksAll {
			mode = kfakeSynced
		}
		k := peers[mode]
		if k == nil {
			return nil
		}
		return &contender{name: mode.name, pid: k.processID, run: func(ctx context.Context) (figures, error) { return run(ctx, k.addr) }}
	}

	for _, spec := range s.produceMatrix() {
		spec := spec
		run := func(ctx context.Context, addr string) (figures, error) {
			return s.runKafkaProduce(ctx, addr, spec)
		}
		throughput := metric{key: "rate", label: "throughput", unit: msgsPerSec}
		var limits []contender
		if spec == produceAllKiB {
			throughput.target = 1
			limits = append(s.sameTurnDiskLimits(), s.busyCoreDiskLimit()) // for limitRows
			if bare != nil {
				limits = append(limits, contender{name: bareKafkaName, pid: bare.processID, run: func(ctx context.Context) (figures, error) {
					return run(ctx, bare.addr)
				}})
			}
		}
		err := s.compare(ctx, comparison{
			workload: spec.String(),
			metrics:  []metric{throughput},
			wharf: contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) {
				return s.runKafkaProduce(ctx, s.wharf.kafkaAddr, spec, watchCommits(spec.recordSize, s.wharf.commitCounters))
			}},
			peer:   peerFor(spec.acksAll, run),
			skip:   skip,
			limits: limits,
			notes: func(_ metric, w, p figures) string {
				var syncNote string
				if spec.acksAll {
					syncNote = kfakeSyncedNote
				}
				return joinNotes(fmt.Sprintf("MB/s: %s (Wharf), %s (peer)", formatNumber(figureOr(w, "mbps")), formatNumber(figureOr(p, "mbps"))), syncNote)
			},
		})
		if err != nil {
			return err
		}
	}

	tail := func(ctx context.Context, addr string) (figures, error) { return s.runKafkaTail(ctx, addr, 1024) }
	err := s.compare(ctx, comparison{
		workload: "Kafka consume from the tail while one acks=1 producer writes, 1 KiB, 1 partition",
		metrics:  []metric{{key: "rate", label: "consumed", unit: msgsPerSec}},
		wharf:    contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) { return tail(ctx, s.wharf.kafkaAddr) }},
		peer:     peerFor(false, tail),
		skip:     skip,
		notes: func(_ metric, w, p figures) string {
			return fmt.Sprintf("produced msg/s meanwhile: %s (Wharf), %s (peer)",
				formatNumber(figureOr(w, "produced")), formatNumber(figureOr(p, "produced")))
		},
	})
	if err != nil {
		return err
	}

	for _, rate := range s.latencyRates() {
		rate := rate
		lat := func(ctx context.Context, addr string) (figures, error) { return s.runKafkaLatency(ctx, addr, rate) }
		err := s.compare(ctx, comparison{
			workload: fmt.Sprintf("Kafka end-to-end at %s msg/s offered (acks=all, 1 KiB, 1 partition, linger 0)", formatNumber(float64(rate))),
			metrics: []metric{
				{key: "p50", label: "p50 produce-to-consume", unit: msLatency},
				{key: "p99", label: "p99", unit: msLatency},
				{key: "p999", label: "p99.9", unit: msLatency},
			},
			wharf: contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) { return lat(ctx, s.wharf.kafkaAddr) }},
			peer:  peerFor(true, lat),
			skip:  skip,
			notes: func(m metric, w, p figures) string {
				if m.key != "p50" {
					return ""
				}
				return fmt.Sprintf("consumed msg/s: %s (Wharf), %s (peer)", formatNumber(figureOr(w, "rate")), formatNumber(figureOr(p, "rate")))
			},
		})
		if err != nil {
			return err
		}
	}
	s.limitRows(produceAllKiB, produceOneKiB)
	return nil
}
