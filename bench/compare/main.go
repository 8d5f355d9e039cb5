// Command compare runs the same workloads, through the same stock clients,
// against Wharf and against its peers — RabbitMQ for AMQP, franz-go's kfake
// test double for Kafka, nats-server (built from the Go module proxy) for
// persistent streaming with JetStream and for Core NATS pub/sub — beside the machine's own disk
// and loopback limits, and prints one Markdown table of figures and
// Wharf/peer ratios, which it also writes to docs/benchmarks.md with a
// description of the machine.
//
//	go run ./bench/compare [-duration 5s] [-runs 3] [-quick] [-full] [-scale]
//
// Every server runs as its own process on 127.0.0.1 with its data in one
// temporary directory; every process it starts is stopped at the end and
// on Ctrl-C. See bench/compare/README.md for what each row means.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the command-line settings of a suite run.
type options struct {
	duration, warmup time.Duration
	runs             int
	quick, full      bool
	scale            bool
	scaleGiB         float64
	scaleCount       int
	idleConns        int
	catchupGiB       float64
	dir              string
	out              string
	only             string
	wharfProfile     string
	clusterDevices   string // "" or clusterDevicesZram
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured length of each run, after the warm-up")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up at the start of each run, not counted")
	flag.IntVar(&o.runs, "runs", 3, "runs per figure; the table shows the median")
	flag.BoolVar(&o.quick, "quick", false, "about a minute: -duration 1s -warmup 500ms -runs 1 (figures are rough)")
	flag.BoolVar(&o.full, "full", false, "the full Kafka matrix (acks x record size x partitions x producers), latency at 50k msg/s too, 16 B AMQP both ways")
	flag.BoolVar(&o.scale, "scale", false, "also run the cost-of-scale sections: idle connections, catch-up from a cold cache, many partitions and queues, start-up time with data on disk")
	flag.Float64Var(&o.scaleGiB, "scale-gib", 10, "GiB of data on disk for the start-up-time measurement of -scale")
	flag.IntVar(&o.idleConns, "idle-conns", 5000, "connections held open by the idle section, per protocol and server")
	flag.Float64Var(&o.catchupGiB, "catchup-gib", 2, "GiB of 1 KiB records the catch-up section writes, then reads back after dropping the page cache")
	flag.IntVar(&o.scaleCount, "scale-count", 10000, "partitions and queues created by -scale")
	flag.StringVar(&o.dir, "dir", os.TempDir(), "directory on the disk to measure; every server's data goes in a temporary directory under it")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "Markdown file to write, relative to the module root (empty: print only)")
	flag.StringVar(&o.only, "only", "", "comma-separated sections to run: limits, amqp, kafka, stream, nats, jetstream, idle, catchup, scale, cluster, security, amqpcluster (default: the first six; -scale adds idle, catchup and scale; cluster, security and amqpcluster run only when named)")
	flag.StringVar(&o.clusterDevices, "cluster-devices", "", "with the cluster section, also run RF3 vs RF1 with each process's data on a device of its own: zram (RAM-backed block devices, made and removed by the run; needs root)")
	flag.StringVar(&o.wharfProfile, "wharf-cpuprofile", "", "run Wharf as a profiled re-execution of this program (same node.Start as `wharf serve`) and write its CPU profile here")

	// Child modes: this program re-executed as a server process.
	kfakeServe := flag.Bool("kfake-serve", false, "internal: run a kfake broker")
	kfakeDir := flag.String("kfake-dir", "", "internal: kfake data directory")
	kfakePort := flag.Int("kfake-port", 0, "internal: kfake port on 127.0.0.1")
	kfakeSync := flag.Bool("kfake-sync", false, "internal: kfake SyncWrites")
	bareServe := flag.Bool("bare-kafka-serve", false, "internal: run the bare Kafka log")
	bareDir := flag.String("bare-kafka-dir", "", "internal: bare Kafka log directory")
	barePort := flag.Int("bare-kafka-port", 0, "internal: bare Kafka log port on 127.0.0.1")
	wharfServe := flag.Bool("wharf-serve", false, "internal: run a profiled Wharf node")
	wsProfile := flag.String("wharf-serve-profile", "", "internal: CPU profile path")
	wsData := flag.String("wharf-serve-data-dir", "", "internal: data directory")
	wsKafka := flag.String("wharf-serve-kafka-addr", "", "internal: Kafka address")
	wsAMQP := flag.String("wharf-serve-amqp-addr", "", "internal: AMQP address")
	wsNATS := flag.String("wharf-serve-nats-addr", "", "internal: NATS address")
	wsHTTP := flag.String("wharf-serve-http-addr", "", "internal: HTTP management API address")
	flag.Parse()

	switch {
	case *kfakeServe:
		exitOn(serveKfake(*kfakeDir, *kfakePort, *kfakeSync))
		return
	case *bareServe:
		exitOn(serveBareKafkaProcess(*bareDir, *barePort))
		return
	case *wharfServe:
		exitOn(serveProfiledWharf(*wsProfile, *wsData, *wsKafka, *wsAMQP, *wsNATS, *wsHTTP))
		return
	}

	if o.quick {
		o.duration, o.warmup, o.runs = time.Second, 500*time.Millisecond, 1
	}
	if o.runs < 1 || o.duration <= 0 || o.warmup < 0 || o.scaleGiB <= 0 || o.scaleCount < 1 || o.idleConns < 1 || o.catchupGiB <= 0 {
		fmt.Fprintln(os.Stderr, "compare: -runs, -duration, -scale-gib, -scale-count, -idle-conns and -catchup-gib must be positive")
		os.Exit(2)
	}
	if o.clusterDevices != "" && o.clusterDevices != clusterDevicesZram {
		fmt.Fprintf(os.Stderr, "compare: -cluster-devices takes %q or nothing, not %q\n", clusterDevicesZram, o.clusterDevices)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o)
	stop()
	exitOn(err)
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}
