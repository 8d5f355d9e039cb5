package main

import (
	"context"
	"fmt"
	"math"
)

// idleSection holds -idle-conns idle connections on fresh servers: AMQP
// (amqp091-go, one channel each) on Wharf and RabbitMQ, Kafka (ApiVersions
// + Metadata) on Wharf and kfake. One run each.
func (s *suite) idleSection(ctx context.Context) error {
	n := s.opts.idleConns
	s.logf("== idle: %d AMQP connections", n)
	w := s.idleOnFreshWharf(ctx, "idle-amqp", n, func(ws *wharfServer) idleDialer { return amqpIdleDialer(ws.amqpURL()) })
	if err := ctx.Err(); err != nil {
		return err
	}
	var p idleResult
	version, skip, err := s.withFreshRabbitMQ(ctx, "rabbitmq-idle", func(r *rabbitServer, pid int) {
		p = s.holdIdle(ctx, pid, n, amqpIdleDialer(r.amqpURL()))
		s.logf("   RabbitMQ %v refused=%v err=%v", p.f, p.refused, p.err)
	})
	if err != nil {
		return err
	}
	peer := ""
	if skip == "" {
		peer = "RabbitMQ"
		s.addVersion(rabbitVersionLine(version))
	}
	s.addIdleRows(fmt.Sprintf("Idle: %s AMQP connections (amqp091-go defaults, heartbeat 10 s, one channel each), held %s", formatCount(float64(n)), holdName()),
		w, p, peer, skip, "heartbeats every 5 s each way (half the 10 s amqp091-go proposes)")

	s.logf("== idle: %d Kafka connections", n)
	w = s.idleOnFreshWharf(ctx, "idle-kafka", n, func(ws *wharfServer) idleDialer { return kafkaIdleDialer(ws.kafkaAddr) })
	if err := ctx.Err(); err != nil {
		return err
	}
	p = idleResult{}
	_, err = s.withFreshKfake(ctx, "idle-kfake", func(k *kfakeServer) (figures, error) {
		p = s.holdIdle(ctx, k.pid(), n, kafkaIdleDialer(k.addr))
		s.logf("   kfake %v refused=%v err=%v", p.f, p.refused, p.err)
		return p.f, p.err
	})
	if p.err == nil && p.f == nil {
		p.err = err // kfake did not start
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.addIdleRows(fmt.Sprintf("Idle: %s Kafka connections (ApiVersions v3 + Metadata each, kmsg over bare TCP), held %s", formatCount(float64(n)), holdName()),
		w, p, kfakeCached.name, "", "no Kafka heartbeat on a connection with no group")
	return nil
}

// idleOnFreshWharf holds n idle connections from dialer on a new Wharf.
func (s *suite) idleOnFreshWharf(ctx context.Context, name string, n int, dialer func(*wharfServer) idleDialer) idleResult {
	var r idleResult
	_, err := s.withFreshWharf(ctx, name, func(ws *wharfServer) (figures, error) {
		r = s.holdIdle(ctx, ws.pid(), n, dialer(ws))
		return r.f, r.err
	})
	if r.err == nil && r.f == nil {
		r.err = err // Wharf did not start
	}
	s.logf("   Wharf %v refused=%v err=%v", r.f, r.refused, r.err)
	return r
}

var idleMetrics = []metric{
	{key: "perconn", label: "resident memory per connection", unit: kibibytes},
	{key: "rss", label: "resident memory at the end of the hold", unit: mebibytes},
	{key: "files", label: "open file descriptors", unit: fileCount},
	{key: "idlecpu", label: "server CPU while idle", unit: coresBusy},
	{key: "open", label: "time to open them all", unit: seconds},
}

// addIdleRows adds the idle rows of one protocol. heartbeat says what the
// idle CPU pays for.
func (s *suite) addIdleRows(workload string, w, p idleResult, peer, skip, heartbeat string) {
	refusals := func() string {
		var notes []string
		if w.refused != nil {
			notes = append(notes, "Wharf: "+w.refused.Error())
		}
		if p.refused != nil {
			notes = append(notes, "peer: "+p.refused.Error())
		}
		return joinNotes(notes...)
	}
	s.addScaleRows(workload, idleMetrics, scaleResult{f: w.f, err: w.err}, scaleResult{f: p.f, err: p.err}, peer, skip,
		func(m metric, wf, pf figures) string {
			both := func(key, unitSuffix string, format func(float64) string) string {
				return fmt.Sprintf("%s%s (Wharf), %s%s (peer)", format(figureOr(wf, key)), unitSuffix, format(figureOr(pf, key)), unitSuffix)
			}
			switch m.key {
			case "perconn":
				return joinNotes(refusals(), "one run; (RSS at the end − RSS before) / connections opened", closedNote(wf, pf))
			case "rss":
				return joinNotes("before: "+both("rss0", " MiB", formatNumber), "right after opening: "+both("rss1", " MiB", formatNumber))
			case "files":
				return joinNotes("before: "+both("files0", "", formatCount), "per connection: "+both("fdsper", "", formatNumber))
			case "idlecpu":
				return fmt.Sprintf("user+system CPU time of the server over the %s hold (counted in 10 ms ticks: %s cores is one tick); %s",
					holdName(), fmt.Sprintf("%g", 0.01/idleHold.Seconds()), heartbeat)
			case "open":
				return fmt.Sprintf("%d at a time, each through its handshake", idleDialers)
			}
			return ""
		})
}

// holdName is the idle hold as the table prints it: "10 s".
func holdName() string { return fmt.Sprintf("%g s", idleHold.Seconds()) }

// closedNote reports connections a server closed while they sat idle.
func closedNote(w, p figures) string {
	closed := func(side string, f figures) string {
		opened, alive := figureOr(f, "opened"), figureOr(f, "alive")
		if math.IsNaN(opened) || alive >= opened {
			return ""
		}
		return fmt.Sprintf("%s closed %s of the idle connections", side, formatCount(opened-alive))
	}
	return joinNotes(closed("Wharf", w), closed("peer", p))
}
