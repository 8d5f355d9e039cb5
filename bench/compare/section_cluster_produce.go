package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"time"
)

// The produce rows of the cluster section: RF3 acks=all on three
// processes against RF1 on one (issue 13's target: at least half), and
// what bounds them on this machine. Its three nodes share one disk, so
// each record is written and fsynced three times to it: the same turns
// measure that disk's ceiling for three replicas (three group-commit
// writers at once, their sum ÷ 3) and for one (one writer), and the CPU
// the servers and the client spent per MB. With -cluster-devices zram the
// same workload runs again with every node on a RAM-backed block device of
// its own: what replication costs when no disk is shared.

// clusterProduceSpec is the workload of the RF3 vs RF1 produce rows.
var clusterProduceSpec = produceSpec{acksAll: true, recordSize: 1024, partitions: 3, producers: 1}

// The sides of the cluster's comparisons, and the disk limits measured in
// the same turns as the produce rows.
const (
	rf3Side                = "Wharf RF3, three processes"
	rf1Side                = "Wharf RF1, one process"
	oneReplicaDiskLimit    = "one group-commit writer"
	threeReplicasDiskLimit = "three group-commit writers at once, their sum ÷ 3"
)

// clusterProduceTarget is issue 13's target for RF3 over RF1.
const clusterProduceTarget = 0.5

// Workloads of the produce rows: on the suite's disk, and (with
// -cluster-devices zram) on RAM-backed devices.
var (
	clusterDiskWorkload = "Cluster: " + clusterProduceSpec.String() + ", RF3 vs RF1"
	clusterRAMWorkload  = clusterDiskWorkload + ", " + ramDiskLabel
)

// clusterProduceRows compares RF3 on c with the suite's RF1 process, with
// the disk limits of one and of three replicas in the same turns, and adds
// a row setting RF3 against its one-disk ceiling.
func (s *suite) clusterProduceRows(ctx context.Context, c *wharfCluster) error {
	workload := clusterDiskWorkload
	rf1 := s.clusterProduceSide(rf1Side, s.wharf.kafkaAddr, func() []int { return []int{s.wharf.pid()} })
	err := s.compare(ctx, comparison{
		workload: workload,
		metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec, target: clusterProduceTarget}},
		wharf:    s.clusterProduceSide(rf3Side, c.seed(), c.pids),
		peer:     &rf1,
		limits: []contender{
			s.replicaDiskLimit(oneReplicaDiskLimit, 1),
			s.replicaDiskLimit(threeReplicasDiskLimit, clusterNodes),
		},
		notes: func(_ metric, rf3, rf1 figures) string {
			return joinNotes(clusterMBNote(rf3, rf1), clusterCPUNote(rf3, rf1), cpuBoundNote(runtime.NumCPU(), rf3, rf1), s.oneDiskRatioCeilingNote(workload),
				"the three nodes' logs share this machine's one disk: RF3 writes and fsyncs every record three times to it")
		},
	})
	if err != nil {
		return err
	}
	if r, ok := s.oneDiskCeilingRow(workload); ok {
		s.rows = append(s.rows, r)
	}
	return nil
}

// clusterProduceSide runs clusterProduceSpec against the broker at addr,
// watching the CPU of the processes pids returns (every node of a
// cluster) and of the client.
func (s *suite) clusterProduceSide(name, addr string, pids func() []int) contender {
	return contender{name: name, run: func(ctx context.Context) (figures, error) {
		f, err := s.runKafkaProduce(ctx, addr, clusterProduceSpec, watchCPU(pids))
		if err == nil {
			cpuPerMB(f)
		}
		return f, err
	}}
}

// replicaDiskLimit is the group-commit disk limit of that many replicas'
// logs sharing this disk: as many writers at once, each appending 1 MiB
// batches to segment files of its own under the suite's directory, each
// with its own rounds of fdatasync. Its "mbps" is one replica's share
// (their sum, "summbps", ÷ replicas) and "rate" that share in records of
// clusterProduceSpec's size: the most a partition of that many replicas
// can take when every replica writes every record to the same disk.
func (s *suite) replicaDiskLimit(name string, replicas int) contender {
	return contender{name: name, run: func(ctx context.Context) (figures, error) {
		f, err := s.runDiskGroupCommitWriters(ctx, 1<<20, replicas)
		if err != nil {
			return nil, err
		}
		return replicaShare(f, replicas), nil
	}}
}

// replicaShare turns the figures of replicas writers into one replica's
// share (replicaDiskLimit).
func replicaShare(writers figures, replicas int) figures {
	share := writers["mbps"] / float64(replicas)
	return figures{
		"summbps": writers["mbps"],
		"mbps":    share,
		"rate":    share * 1e6 / float64(clusterProduceSpec.recordSize),
	}
}

// oneDiskCeilingRow sets RF3's throughput against the three-replica disk
// limit measured in the same turns: the ceiling one disk puts on RF3
// whatever the software does. Not ok when either was not measured.
func (s *suite) oneDiskCeilingRow(workload string) (row, bool) {
	rf3, ok3 := s.medians[workload+"|"+rf3Side]
	rf1, ok1 := s.medians[workload+"|"+rf1Side]
	three, okL := s.medians[workload+"|"+threeReplicasDiskLimit]
	one := s.medians[workload+"|"+oneReplicaDiskLimit]
	if !ok3 || !okL {
		return row{}, false
	}
	runRatios := ""
	if note := runRatiosNote(s.runs[workload+"|"+rf3Side], s.runs[workload+"|"+threeReplicasDiskLimit]); note != "" {
		runRatios = "RF3 / ceiling " + note
	}
	rf1Note := ""
	if ok1 {
		rf1Note = fmt.Sprintf("RF1 reached %s of one writer (%s MB/s)",
			formatRatio(figureOr(rf1, "mbps")/figureOr(one, "mbps")), formatNumber(figureOr(one, "mbps")))
	}
	return row{
		Workload:  "Cluster: " + clusterProduceSpec.String() + ", RF3 vs the ceiling of three replicas on one disk: throughput",
		Unit:      msgsPerSec,
		Wharf:     figureOr(rf3, "rate"),
		Peer:      "limit: one disk, " + threeReplicasDiskLimit,
		Limit:     true,
		PeerValue: figureOr(three, "rate"),
		Notes: joinNotes(
			fmt.Sprintf("the ceiling: %d writers appending 1 MiB batches at once to this disk, each to 1 GiB segment files of its own with up to %d batches unsynced while its rounds of fdatasync run (as each node's log does), all but one writing past the page cache with O_DIRECT (as followers do), %s MB/s together, %s MB/s each, in %s records; measured in the same turns as RF3 and RF1",
				clusterNodes, groupCommitInFlight, formatNumber(figureOr(three, "summbps")), formatNumber(figureOr(three, "mbps")), sizeName(clusterProduceSpec.recordSize)),
			runRatios,
			rf1Note,
			"RF3's figure counts record values only (its logs also hold about 1% of record and batch headers)"),
	}, true
}

// oneDiskRatioCeilingNote gives the most RF3 / RF1 could be on this disk
// beside RF1's figure: the three-replica ceiling over it. (Not over the
// one-writer limit: RF1 writes a file per partition, and beats one writer
// when the disk is busy.)
func (s *suite) oneDiskRatioCeilingNote(workload string) string {
	three, ok3 := s.medians[workload+"|"+threeReplicasDiskLimit]
	rf1, ok1 := s.medians[workload+"|"+rf1Side]
	if !ok3 || !ok1 {
		return ""
	}
	return fmt.Sprintf("on this disk RF3 / RF1 can reach at most %s: the ceiling of three replicas (each of three writers at once: %s MB/s) over RF1's %s MB/s",
		formatRatio(figureOr(three, "mbps")/figureOr(rf1, "mbps")), formatNumber(figureOr(three, "mbps")), formatNumber(figureOr(rf1, "mbps")))
}

// cpuBoundNote gives the MB/s each side could reach if CPU were its only
// limit: the machine's cores over the CPU per MB the servers and the
// client spent together (a rough bound: the cost per MB shrinks as
// batches grow). RF3's bound over RF1's measured figure is the most RF3 /
// RF1 could be with a disk per node on these cores.
func cpuBoundNote(cores int, rf3, rf1 figures) string {
	bound := func(f figures) float64 {
		return float64(cores) * 1000 / (figureOr(f, "serverms") + figureOr(f, "clientms"))
	}
	b3, b1 := bound(rf3), bound(rf1)
	if math.IsNaN(b3) || math.IsNaN(b1) {
		return ""
	}
	return fmt.Sprintf("at these CPU costs per MB (servers and client together) the %d cores could carry at most %s MB/s of RF3, %s RF1's figure, and %s MB/s of RF1",
		cores, formatNumber(b3), formatRatio(b3/figureOr(rf1, "mbps")), formatNumber(b1))
}

// offTheDiskNote sets each side's throughput on RAM-backed devices against
// the same side's on the shared disk, earlier in the same run: when RF3
// gains no more than RF1, the shared disk was not what held it back.
func (s *suite) offTheDiskNote() string {
	gain := func(side string) float64 {
		return figureOr(s.medians[clusterRAMWorkload+"|"+side], "rate") / figureOr(s.medians[clusterDiskWorkload+"|"+side], "rate")
	}
	g3, g1 := gain(rf3Side), gain(rf1Side)
	if math.IsNaN(g3) || math.IsNaN(g1) {
		return ""
	}
	return fmt.Sprintf("against the same side on the shared disk earlier in this run: RF3 %s, RF1 %s", formatRatio(g3), formatRatio(g1))
}

// clusterMBNote gives both sides' MB/s of record values.
func clusterMBNote(rf3, rf1 figures) string {
	return fmt.Sprintf("MB/s: %s (RF3), %s (RF1)", formatNumber(figureOr(rf3, "mbps")), formatNumber(figureOr(rf1, "mbps")))
}

// clusterCPUNote gives the CPU time per MB of records and the cores kept
// busy in the window, of the servers (RF3: its three processes summed)
// and of the client (this process).
func clusterCPUNote(rf3, rf1 figures) string {
	n := func(f figures, key string) string { return formatNumber(figureOr(f, key)) }
	return fmt.Sprintf("CPU per MB, servers: %s ms (RF3, three processes summed), %s ms (RF1); client: %s ms (RF3), %s ms (RF1); cores busy, servers: %s (RF3), %s (RF1), client: %s (RF3), %s (RF1)",
		n(rf3, "serverms"), n(rf1, "serverms"), n(rf3, "clientms"), n(rf1, "clientms"),
		n(rf3, "servercores"), n(rf1, "servercores"), n(rf3, "clientcores"), n(rf1, "clientcores"))
}

// ramDiskLabel is what the RAM-disk rows measure and what they do not.
const ramDiskLabel = "each node on its own RAM-backed block device: replication's cost without the shared disk; not durable storage"

// clusterRAMDiskRows (with -cluster-devices zram) runs RF3 against RF1
// again, a fresh single process and a fresh cluster, each process's data
// directory on an ext4 filesystem of its own on a zram device; the
// devices are removed afterwards, on failure too. A device that cannot be
// made leaves the rows out, saying why; nothing falls back to another
// kind of storage.
func (s *suite) clusterRAMDiskRows(ctx context.Context) error {
	if s.opts.clusterDevices != clusterDevicesZram {
		return nil
	}
	skip := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.logf("   RAM-backed devices: %v", err)
		s.skipped = append(s.skipped, "RF3 vs RF1, "+ramDiskLabel+" (-cluster-devices zram): "+err.Error())
		return nil
	}
	s.logf("== cluster: RF3 vs RF1, %s", ramDiskLabel)
	disks, err := newRAMDisks(filepath.Join(s.work, "ramdisks"), clusterNodes+1)
	if err != nil {
		return skip(err)
	}
	defer func() {
		if err := removeRAMDisks(disks); err != nil {
			s.logf("removing the RAM-backed devices: %v", err)
		}
	}()
	single, err := s.startWharf(ctx, filepath.Join(disks[0].dir, "data"))
	if err != nil {
		return skip(fmt.Errorf("start RF1: %w", err))
	}
	defer func() {
		s.procs.forget(single.child)
		single.terminate(time.Minute)
	}()
	var dirs []string
	for _, d := range disks[1:] {
		dirs = append(dirs, filepath.Join(d.dir, "data"))
	}
	c, err := s.launchCluster(ctx, "cluster-ramdisk", false, dirs)
	if err != nil {
		return skip(fmt.Errorf("start RF3: %w", err))
	}
	defer c.stop()
	rf1 := s.clusterProduceSide(rf1Side, single.kafkaAddr, func() []int { return []int{single.pid()} })
	return s.compare(ctx, comparison{
		workload: clusterRAMWorkload,
		metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec}},
		wharf:    s.clusterProduceSide(rf3Side, c.seed(), c.pids),
		peer:     &rf1,
		notes: func(_ metric, rf3, rf1 figures) string {
			return joinNotes(clusterMBNote(rf3, rf1), s.offTheDiskNote(), clusterCPUNote(rf3, rf1), cpuBoundNote(runtime.NumCPU(), rf3, rf1),
				fmt.Sprintf("every process's data on an ext4 filesystem of its own (mounted with discard) on a zram device of %s: the block layer honours fsync, the device compresses the blocks into RAM (%s, CPU partly of the writing process) and keeps nothing across a power cut; issue 13's %s target concerns durable storage, not this",
					ramDiskSize, disks[0].compression(), formatRatio(clusterProduceTarget)))
		},
	})
}
