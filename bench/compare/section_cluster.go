package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster section (issue 13): Kafka on three `wharf serve` processes
// forming one cluster, topics of three replicas (RF3, acks=all answered
// once two of three fsynced), beside the suite's single process (RF1) in
// the same run: produce throughput, end-to-end latency, failover time
// and the cost of 1,000 idle replicated partitions. Opt-in: -only cluster.

const (
	clusterNodes = 3
	// clusterIdlePartitions is how many idle partitions the idle rows
	// hold: 10 topics of 100.
	clusterIdlePartitions = 1000
	clusterIdleTopics     = 10
	// clusterElectionTimeout is the nodes' Raft election timeout
	// (--election-timeout; Wharf's default).
	clusterElectionTimeout = time.Second
)

// onlyWhenNamed runs section only when -only names it: -scale alone
// does not (the cluster section starts three more servers).
func (s *suite) onlyWhenNamed(name string, section func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if !slices.Contains(strings.Split(strings.ReplaceAll(s.opts.only, " ", ""), ","), name) {
			return nil
		}
		return section(ctx)
	}
}

func (s *suite) clusterSection(ctx context.Context) error {
	c, err := s.startWharfCluster(ctx, "cluster")
	if err != nil {
		return fmt.Errorf("start a %d-node cluster: %w", clusterNodes, err)
	}
	defer c.stop()
	if err := s.clusterProduceRows(ctx, c); err != nil {
		return err
	}
	if err := s.clusterRAMDiskRows(ctx); err != nil {
		return err
	}
	rf1 := &contender{name: rf1Side, pid: s.wharf.processID}
	rf3 := contender{name: rf3Side, pid: c.nodes[0].processID}

	const rate = 1000
	rf3.run = func(ctx context.Context) (figures, error) { return s.runKafkaLatency(ctx, c.seed(), rate) }
	rf1.run = func(ctx context.Context) (figures, error) { return s.runKafkaLatency(ctx, s.wharf.kafkaAddr, rate) }
	err = s.compare(ctx, comparison{
		workload: fmt.Sprintf("Cluster: Kafka end-to-end at %s msg/s offered (acks=all, 1 KiB, 1 partition, linger 0), RF3 vs RF1", formatNumber(rate)),
		metrics: []metric{
			{key: "p50", label: "p50 produce-to-consume", unit: msLatency},
			{key: "p99", label: "p99", unit: msLatency},
		},
		wharf: rf3, peer: rf1,
	})
	if err != nil {
		return err
	}

	if err := s.clusterFailoverRows(ctx, c); err != nil {
		return err
	}
	return s.clusterIdleRows(ctx, c)
}

// wharfCluster is clusterNodes `wharf serve` processes on loopback, each
// with its own data directory, Kafka port and cluster port.
type wharfCluster struct {
	s     *suite
	nodes []*clusterNode
}

// clusterNode is one node: its command line, kept to restart it.
type clusterNode struct {
	*child
	id        int32
	kafkaAddr string
	amqpAddr  string // "": AMQP off
	httpAddr  string // the management API's, "" (off) unless AMQP is on
	args      []string
	logPath   string
}

func (s *suite) startWharfCluster(ctx context.Context, name string) (*wharfCluster, error) {
	return s.startWharfClusterWith(ctx, name, false)
}

// startWharfClusterWith starts the cluster's nodes, each also serving
// AMQP and the management API on ports of its own when withAMQP is set.
func (s *suite) startWharfClusterWith(ctx context.Context, name string, withAMQP bool) (*wharfCluster, error) {
	return s.launchCluster(ctx, name, withAMQP, nil)
}

// launchCluster starts the cluster's nodes with their data in dataDirs,
// one per node, or (nil) in directories of their own under the suite's.
func (s *suite) launchCluster(ctx context.Context, name string, withAMQP bool, dataDirs []string) (*wharfCluster, error) {
	c := &wharfCluster{s: s}
	base := filepath.Join(s.work, s.uniqueName(name))
	var initial []string
	for i := range clusterNodes {
		kport, err := freePort()
		if err != nil {
			return nil, err
		}
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		nd := &clusterNode{id: int32(i + 1), kafkaAddr: loopback(kport), logPath: base + fmt.Sprintf("-node%d.log", i+1)}
		if withAMQP {
			aport, err := freePort()
			if err != nil {
				return nil, err
			}
			hport, err := freePort()
			if err != nil {
				return nil, err
			}
			nd.amqpAddr, nd.httpAddr = loopback(aport), loopback(hport)
		}
		dataDir := filepath.Join(base, fmt.Sprint("node", i+1))
		if dataDirs != nil {
			dataDir = dataDirs[i]
		}
		nd.args = []string{"serve", "--data-dir", dataDir, "--kafka-addr", nd.kafkaAddr,
			"--amqp-addr", nd.amqpAddr, "--http-addr", nd.httpAddr, "--nats-addr", "", "--log-level", "warn",
			"--node-id", fmt.Sprint(i + 1), "--cluster-addr", loopback(cport),
			"--election-timeout", clusterElectionTimeout.String()}
		initial = append(initial, fmt.Sprintf("%d@%s", i+1, loopback(cport)))
		c.nodes = append(c.nodes, nd)
	}
	// All at once: a node serves only once the metadata group has a
	// quorum.
	for _, nd := range c.nodes {
		nd.args = append(nd.args, "--initial-cluster", strings.Join(initial, ","))
		if err := c.start(nd); err != nil {
			c.stop()
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		if err := waitForTCP(ctx, nd.child, nd.kafkaAddr, 2*time.Minute); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// start runs nd's process (again, after a kill).
func (c *wharfCluster) start(nd *clusterNode) error {
	ch, err := c.s.procs.start(fmt.Sprint("wharf node ", nd.id), exec.Command(c.s.wharfBin, nd.args...), nd.logPath)
	nd.child = ch
	return err
}

// kill stops nd with SIGKILL.
func (c *wharfCluster) kill(nd *clusterNode) {
	c.s.procs.forget(nd.child)
	nd.child.kill()
}

func (c *wharfCluster) stop() {
	for _, nd := range c.nodes {
		if nd.child != nil {
			c.s.procs.forget(nd.child)
			nd.terminate(time.Minute)
		}
	}
}

func (c *wharfCluster) seed() string { return c.nodes[0].kafkaAddr }

func (c *wharfCluster) seeds() []string {
	var seeds []string
	for _, nd := range c.nodes {
		seeds = append(seeds, nd.kafkaAddr)
	}
	return seeds
}

// waitSettled waits until every partition of topics has a leader other
// than not (0: any) and all its replicas in sync, and returns partition
// 0's leader of the first topic. A new topic of a cluster has no leaders
// until its groups elect them (a producer would wait out its metadata
// refresh interval, 5 s for franz-go); on one node it settles at once.
func waitSettled(ctx context.Context, adm *kadm.Client, not int32, topics ...string) (int32, error) {
	for {
		md, err := adm.Metadata(ctx, topics...)
		if err == nil {
			if leader, ok := settled(md, not, topics); ok {
				return leader, nil
			}
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return 0, err
		}
	}
}

// settled reports whether every partition of topics in md has a leader
// (other than not) and every replica in sync.
func settled(md kadm.Metadata, not int32, topics []string) (leader int32, ok bool) {
	for i, name := range topics {
		t, found := md.Topics[name]
		if !found || t.Err != nil || len(t.Partitions) == 0 {
			return 0, false
		}
		for _, p := range t.Partitions {
			if p.Err != nil || p.Leader < 0 || p.Leader == not || len(p.ISR) != len(p.Replicas) {
				return 0, false
			}
		}
		if i == 0 {
			leader = t.Partitions[0].Leader
		}
	}
	return leader, true
}

// clusterFailoverRows measures, -runs times but at least three, the time
// from SIGKILL of a partition's leader to the first acknowledgement of a
// record produced after the kill, under a steady acks=all load.
func (s *suite) clusterFailoverRows(ctx context.Context, c *wharfCluster) error {
	s.logf("== cluster: failover")
	var times []float64
	var runErr error
	for run := 1; run <= max(s.opts.runs, 3) && runErr == nil; run++ {
		d, err := s.runFailover(ctx, c)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			runErr = err
			s.logf("   run %d failed: %v", run, err)
			break
		}
		s.logf("   run %d failover %v", run, d.Round(time.Millisecond))
		times = append(times, millis(d))
	}
	outcome := fmt.Sprintf("runs: %s ms", formatList(times))
	if runErr != nil {
		outcome = joinNotes(outcome, failureNote(true, "Wharf", runErr))
	}
	s.rows = append(s.rows, row{
		Workload:  "Cluster: failover, partition leader killed (SIGKILL) → first acks=all acknowledgement of a record produced after it (RF3, 3 processes)",
		Unit:      msTime,
		Wharf:     figureOr(medianFigures(figuresOf("ms", times)), "ms"),
		PeerValue: figureOr(nil, ""),
		Notes: joinNotes("median; peer skipped: a single process has no failover",
			fmt.Sprintf("target < 2,000 ms; --election-timeout %v", clusterElectionTimeout),
			"franz-go refreshing metadata at most every 100 ms, 50 ms retry backoff", outcome),
	})
	return nil
}

// runFailover kills the leader of a new RF3 partition under load,
// measures the failover, then restarts the node and waits until it is
// back in sync.
func (s *suite) runFailover(ctx context.Context, c *wharfCluster) (time.Duration, error) {
	adm, closeAdmin, err := newSeedAdmin(c.seeds())
	if err != nil {
		return 0, err
	}
	defer closeAdmin()
	topic := s.uniqueName("failover")
	if resp, err := adm.CreateTopic(ctx, 1, int16(clusterNodes), nil, topic); err != nil || resp.Err != nil {
		return 0, fmt.Errorf("create %s: %v %v", topic, err, resp.Err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	leader, err := waitSettled(waitCtx, adm, 0, topic)
	if err != nil {
		return 0, fmt.Errorf("no healthy %s: %w", topic, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var mu sync.Mutex
	var killedAt, firstAck time.Time
	acked := make(chan struct{})
	loadCtx, stopLoad := context.WithCancel(waitCtx)
	defer stopLoad()
	value := make([]byte, 1024)
	go func() {
		for loadCtx.Err() == nil {
			mu.Lock()
			after := !killedAt.IsZero()
			mu.Unlock()
			cl.Produce(loadCtx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err == nil && after && firstAck.IsZero() {
					firstAck = time.Now()
					close(acked)
				}
			})
			if err := sleepUntil(loadCtx, time.Now().Add(time.Millisecond)); err != nil {
				return
			}
		}
	}()
	if err := sleepUntil(waitCtx, time.Now().Add(time.Second)); err != nil { // the load settles
		return 0, err
	}
	victim := c.nodes[leader-1]
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.kill(victim)
	select {
	case <-acked:
	case <-waitCtx.Done():
		return 0, errors.New("no acknowledgement within a minute of the kill")
	}
	stopLoad()
	mu.Lock()
	failover := firstAck.Sub(killedAt)
	mu.Unlock()
	if err := c.start(victim); err != nil {
		return 0, err
	}
	if err := waitForTCP(waitCtx, victim.child, victim.kafkaAddr, time.Minute); err != nil {
		return 0, err
	}
	if _, err := waitSettled(waitCtx, adm, 0, topic); err != nil {
		return 0, fmt.Errorf("node %d did not catch up: %w", victim.id, err)
	}
	_, _ = adm.DeleteTopics(waitCtx, topic)
	return failover, nil
}

// clusterIdleRows holds clusterIdlePartitions idle partitions, RF3 on the
// cluster beside RF1 on a fresh single process, and reports per node the
// CPU they cost, the resident memory and the open files.
func (s *suite) clusterIdleRows(ctx context.Context, c *wharfCluster) error {
	s.logf("== cluster: %d idle partitions", clusterIdlePartitions)
	rf3, err3 := s.holdIdlePartitions(ctx, c.seeds(), c.pids())
	s.logf("   RF3 %v err=%v", rf3, err3)
	rf1, err1 := s.withFreshWharf(ctx, "cluster-idle-rf1", func(w *wharfServer) (figures, error) {
		return s.holdIdlePartitions(ctx, []string{w.kafkaAddr}, []int{w.pid()})
	})
	s.logf("   RF1 %v err=%v", rf1, err1)
	if err := ctx.Err(); err != nil {
		return err
	}
	s.addScaleRows(fmt.Sprintf("Cluster: %s idle partitions (%d topics), held %s, per node: RF3 on three processes vs RF1 on one",
		formatCount(clusterIdlePartitions), clusterIdleTopics, holdName()),
		[]metric{
			{key: "idlecpu", label: "CPU while idle", unit: coresBusy},
			{key: "rss", label: "resident memory", unit: mebibytes},
			{key: "files", label: "open file descriptors", unit: fileCount},
		},
		scaleResult{f: rf3, err: err3}, scaleResult{f: rf1, err: err1}, rf1Side, "",
		func(m metric, w, _ figures) string {
			if m.key == "idlecpu" {
				return fmt.Sprintf("mean of the nodes; the busiest node: %s cores; target for RF3: well under 0.05 cores per node (issue 13)",
					formatNumber(figureOr(w, "idlecpumax")))
			}
			return "mean of the nodes"
		})
	return nil
}

func (c *wharfCluster) pids() []int {
	var pids []int
	for _, nd := range c.nodes {
		pids = append(pids, nd.pid())
	}
	return pids
}

// holdIdlePartitions creates clusterIdleTopics topics of the broker's
// default replication factor holding clusterIdlePartitions partitions in
// all, waits until every one has a leader and all its replicas in sync,
// lets the Raft groups quiesce, then measures each process in pids over
// idleHold: mean CPU (cores busy), the busiest process's, and mean
// resident memory and open files at the end.
func (s *suite) holdIdlePartitions(ctx context.Context, seeds []string, pids []int) (figures, error) {
	adm, closeAdmin, err := newSeedAdmin(seeds)
	if err != nil {
		return nil, err
	}
	defer closeAdmin()
	var topics []string
	for range clusterIdleTopics {
		topic := s.uniqueName("idle")
		resp, err := adm.CreateTopic(ctx, clusterIdlePartitions/clusterIdleTopics, -1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", topic, err)
		}
		topics = append(topics, topic)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := waitSettled(waitCtx, adm, 0, topics...); err != nil {
		return nil, fmt.Errorf("partitions never all led and in sync: %w", err)
	}
	// Quiescence: a group idle for two ticks stops; give every group
	// several election timeouts.
	if err := sleepUntil(ctx, time.Now().Add(5*clusterElectionTimeout)); err != nil {
		return nil, err
	}
	cpu0 := make([]float64, len(pids))
	for i, pid := range pids {
		if cpu0[i], err = processCPUSeconds(pid); err != nil {
			return nil, err
		}
	}
	if err := sleepUntil(ctx, time.Now().Add(idleHold)); err != nil {
		return nil, err
	}
	f := figures{}
	for i, pid := range pids {
		cpu1, err := processCPUSeconds(pid)
		if err != nil {
			return nil, err
		}
		size, err := sizeOf(pid, "")
		if err != nil {
			return nil, err
		}
		busy := (cpu1 - cpu0[i]) / idleHold.Seconds()
		f["idlecpu"] += busy / float64(len(pids))
		f["idlecpumax"] = max(f["idlecpumax"], busy)
		f["rss"] += size["rss"] / float64(len(pids))
		f["files"] += size["files"] / float64(len(pids))
	}
	return f, nil
}

// newSeedAdmin is an admin client of the cluster at seeds.
func newSeedAdmin(seeds []string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// figuresOf makes one figures map per value, under key.
func figuresOf(key string, values []float64) []figures {
	var fs []figures
	for _, v := range values {
		fs = append(fs, figures{key: v})
	}
	return fs
}

func formatList(vs []float64) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, formatCount(v))
	}
	return strings.Join(parts, ", ")
}
