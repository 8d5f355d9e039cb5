package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Wharf's group commit, seen from outside: its /metrics counts commit
// rounds (wharf_fsync_duration_seconds: one observation per round, the
// time its fdatasyncs took) and the offsets each made durable
// (wharf_group_commit_offsets). Read at the start and end of a run's
// window, they say whether an fdatasync was in flight all the time while
// the producer waited, and how much each round covered: what the disk
// limit's group-commit method reports of itself.

// commitCounterLines are the /metrics samples commitCounters reads, by the
// key it gives them.
var commitCounterLines = map[string]string{
	"rounds":  "wharf_fsync_duration_seconds_count",
	"fsync_s": "wharf_fsync_duration_seconds_sum",
	"offsets": "wharf_group_commit_offsets_sum",
}

// commitCounters reads Wharf's group-commit counters, totals since it
// started.
func (w *wharfServer) commitCounters(ctx context.Context) (figures, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseCommitCounters(bufio.NewScanner(resp.Body))
}

// parseCommitCounters picks commitCounterLines out of a Prometheus text
// exposition.
func parseCommitCounters(sc *bufio.Scanner) (figures, error) {
	f := figures{}
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for key, metric := range commitCounterLines {
			if name == metric {
				v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", metric, err)
				}
				f[key] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(f) != len(commitCounterLines) {
		return nil, fmt.Errorf("/metrics lacks the group-commit counters (found %v)", f)
	}
	return f, nil
}

// commitFigures turns the counters read at a window's start and end into
// the figures of a run: commit rounds per second ("rounds"), the share of
// the window an fdatasync was in flight ("fsyncbusy", 0..1), and MB of
// records of recordSize each round made durable ("roundmb").
func commitFigures(start, end figures, w window, recordSize int) figures {
	rounds := end["rounds"] - start["rounds"]
	if rounds <= 0 {
		return figures{}
	}
	return figures{
		"rounds":    rounds / w.seconds(),
		"fsyncbusy": (end["fsync_s"] - start["fsync_s"]) / w.seconds(),
		"roundmb":   (end["offsets"] - start["offsets"]) * float64(recordSize) / rounds / 1e6,
	}
}

// watchCommits is a windowWatch of Wharf's group commit: it reads
// counters at the window's start and end and gives the run's commit
// figures of records of recordSize.
func watchCommits(recordSize int, counters func(context.Context) (figures, error)) windowWatch {
	return func(ctx context.Context, w window) <-chan figures {
		return sampleWindow(ctx, w, counters, func(start, end figures) figures {
			return commitFigures(start, end, w, recordSize)
		})
	}
}
