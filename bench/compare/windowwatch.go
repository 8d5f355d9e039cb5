package main

import (
	"context"
	"os"
)

// windowWatch watches a run's window from outside the workload: it sends
// the run's figures once the window is over (none when it could not
// measure them).
type windowWatch func(ctx context.Context, w window) <-chan figures

// sampleWindow reads totals with read at w's start and end and, once the
// window is over, sends derive(start, end): empty figures when a read
// failed or ctx ended first.
func sampleWindow(ctx context.Context, w window, read func(context.Context) (figures, error), derive func(start, end figures) figures) <-chan figures {
	out := make(chan figures, 1)
	go func() {
		f := figures{}
		defer func() { out <- f }()
		if sleepUntil(ctx, w.start) != nil {
			return
		}
		start, err := read(ctx)
		if err != nil || sleepUntil(ctx, w.end) != nil {
			return
		}
		end, err := read(ctx)
		if err != nil {
			return
		}
		f = derive(start, end)
	}()
	return out
}

// watchCPU is a windowWatch of CPU time: the cores the server processes
// pids (the nodes of a cluster, summed) kept busy in the window
// ("servercores") and those this process, the clients, did
// ("clientcores").
func watchCPU(pids func() []int) windowWatch {
	read := func(context.Context) (figures, error) {
		var servers float64
		for _, pid := range pids() {
			secs, err := processCPUSeconds(pid)
			if err != nil {
				return nil, err
			}
			servers += secs
		}
		client, err := processCPUSeconds(os.Getpid())
		if err != nil {
			return nil, err
		}
		return figures{"servers": servers, "client": client}, nil
	}
	return func(ctx context.Context, w window) <-chan figures {
		return sampleWindow(ctx, w, read, func(start, end figures) figures {
			return figures{
				"servercores": (end["servers"] - start["servers"]) / w.seconds(),
				"clientcores": (end["client"] - start["client"]) / w.seconds(),
			}
		})
	}
}

// cpuPerMB adds to a run's figures the CPU time the servers and the
// clients spent per MB of records ("serverms", "clientms"), from the
// cores watchCPU measured and the run's MB/s ("mbps").
func cpuPerMB(f figures) {
	mbps, ok := f["mbps"]
	if !ok || mbps <= 0 {
		return
	}
	for cores, ms := range map[string]string{"servercores": "serverms", "clientcores": "clientms"} {
		if c, ok := f[cores]; ok {
			f[ms] = 1000 * c / mbps
		}
	}
}
