package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	startupPartitions = 4
	startupRecordSize = 16 << 10
)

// scaleStartup measures start-up with -scale-gib GiB on disk, Wharf beside
// kfake.
func (s *suite) scaleStartup(ctx context.Context) error {
	return s.startupRows(ctx, s.opts.scaleGiB)
}

// startupServer is a Kafka broker process started for a start-up
// measurement.
type startupServer struct {
	addr  string
	proc  *child
	close func()
}

// startupRows fills a topic with gib GiB, then times two restarts of the
// same data: after a clean stop (SIGTERM) and after kill -9. The clock runs
// from starting the process until the broker answers ListOffsets with every
// record there.
func (s *suite) startupRows(ctx context.Context, gib float64) error {
	s.logf("== scale: start-up with %g GiB on disk", gib)
	var w, p scaleResult
	wdir := filepath.Join(s.work, "scale-startup")
	w.f, w.err = s.measureStartup(ctx, gib, func() (startupServer, error) {
		ws, err := s.startWharf(ctx, wdir)
		if err != nil {
			return startupServer{}, err
		}
		return startupServer{addr: ws.kafkaAddr, proc: ws.child, close: func() { ws.terminate(time.Minute) }}, nil
	})
	s.logf("   Wharf %v %v", w.f, w.err)
	os.RemoveAll(wdir)
	if err := ctx.Err(); err != nil {
		return err
	}
	kdir := filepath.Join(s.work, "scale-startup-kfake")
	p.f, p.err = s.measureStartup(ctx, gib, func() (startupServer, error) {
		k, err := s.startKfake(ctx, kfakeCached, kdir)
		if err != nil {
			return startupServer{}, err
		}
		return startupServer{addr: k.addr, proc: k.child, close: func() { k.terminate(time.Minute) }}, nil
	})
	s.logf("   kfake %v %v", p.f, p.err)
	os.RemoveAll(kdir)
	if err := ctx.Err(); err != nil {
		return err
	}
	s.addScaleRows(fmt.Sprintf("Scale: start-up with %g GiB on disk (%d partitions, 16 KiB records)", gib, startupPartitions),
		[]metric{
			{key: "clean", label: "after a clean stop, until ListOffsets sees every record", unit: seconds},
			{key: "crash", label: "after kill -9", unit: seconds},
			{key: "rss-clean", label: "resident memory after start-up", unit: mebibytes},
		}, w, p, kfakeCached.name, "", func(m metric, wf, pf figures) string {
			switch m.key {
			case "clean":
				return "one run; page cache warm (the data was just written); kfake rebuilds its in-memory batch index by reading every segment file at each start"
			case "crash":
				return "one run"
			case "rss-clean":
				return fmt.Sprintf("after writing the data, before the first stop: %s MiB (Wharf), %s MiB (peer)",
					formatNumber(figureOr(wf, "rss-filled")), formatNumber(figureOr(pf, "rss-filled")))
			}
			return ""
		})
	return nil
}

// measureStartup fills a new topic on a server from start with gib GiB,
// stops it cleanly, and times a start after that stop ("clean") and, after
// killing that process with SIGKILL, a start that recovers ("crash"), with
// the resident memory after each ("rss-clean", "rss-crash") and after
// the fill ("rss-filled").
func (s *suite) measureStartup(ctx context.Context, gib float64, start func() (startupServer, error)) (figures, error) {
	srv, err := start()
	if err != nil {
		return nil, err
	}
	topic := s.uniqueName("startup")
	records, err := fillTopic(ctx, srv.addr, topic, startupPartitions, startupRecordSize, int64(gib*(1<<30)))
	if err != nil {
		srv.close()
		return nil, err
	}
	out := figures{}
	if rss, err := residentMiB(srv.proc.pid()); err == nil {
		out["rss-filled"] = rss
	}
	s.procs.forget(srv.proc)
	if err := srv.proc.terminate(5 * time.Minute); err != nil {
		return nil, err
	}
	for _, crash := range []bool{false, true} {
		t0 := time.Now()
		srv, err = start()
		if err != nil {
			return nil, err
		}
		if err := awaitRecords(ctx, srv.addr, topic, records, 10*time.Minute); err != nil {
			srv.close()
			return nil, err
		}
		key := "clean"
		if crash {
			key = "crash"
		}
		out[key] = time.Since(t0).Seconds()
		if rss, err := residentMiB(srv.proc.pid()); err == nil {
			out["rss-"+key] = rss
		}
		s.procs.forget(srv.proc)
		if !crash {
			srv.proc.kill()
		} else {
			srv.close()
		}
	}
	return out, nil
}

// awaitRecords polls ListOffsets until the end offsets of topic add up to
// records.
func awaitRecords(ctx context.Context, addr, topic string, records int64, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		offsets, err := adm.ListEndOffsets(reqCtx, topic)
		cancel()
		if err == nil {
			err = offsets.Error()
		}
		if err == nil {
			var sum int64
			offsets.Each(func(o kadm.ListedOffset) { sum += o.Offset })
			if sum == records {
				return nil
			}
			err = fmt.Errorf("%d of %d records", sum, records)
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return errors.Join(fmt.Errorf("records not all there after %v", timeout), last)
}
