package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Scenarios run through nats.go against nats-server and Wharf at once,
// each writing down what its client sees; the two transcripts must be
// the same line for line.

// sameTranscripts runs scenario against both servers and compares what
// it wrote down.
func sameTranscripts(t *testing.T, scenario func(t *testing.T, js jetstream.JetStream, note func(format string, args ...any))) {
	servers := bothJetStreams(t)
	transcripts := make([][]string, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		_, js := connectJS(t, srv)
		wg.Go(func() {
			t.Run(srv.name, func(t *testing.T) {
				scenario(t, js, func(format string, args ...any) {
					transcripts[i] = append(transcripts[i], fmt.Sprintf(format, args...))
				})
			})
		})
	}
	wg.Wait()
	wharf, natsServer := transcripts[0], transcripts[1]
	if missed, ok := updatesMissedBy(natsServer, wharf); ok && len(missed) > 0 {
		// nats-server's KV watcher (nats.go's ordered push consumer)
		// misses a live update now and then (about 2 runs in 40): the
		// reference's lapse is noted, not held against Wharf.
		t.Logf("nats-server's watchers missed %q, which Wharf's saw", missed)
		return
	}
	for i := range max(len(wharf), len(natsServer)) {
		line := func(tr []string) string {
			if i < len(tr) {
				return tr[i]
			}
			return "(nothing)"
		}
		if line(wharf) != line(natsServer) {
			t.Errorf("line %d\n  wharf:       %s\n  nats-server: %s", i+1, line(wharf), line(natsServer))
		}
	}
	t.Logf("transcript (nats-server):\n%s", fmt.Sprint(natsServer))
}

// updatesMissedBy tells whether transcript is full with only watcher
// updates left out, and which.
func updatesMissedBy(transcript, full []string) (missed []string, ok bool) {
	next := 0
	for _, line := range full {
		if next < len(transcript) && transcript[next] == line {
			next++
			continue
		}
		if !strings.HasPrefix(line, "watch: ") {
			return nil, false
		}
		missed = append(missed, line)
	}
	return missed, next == len(transcript)
}

// apiErrorOf describes an error as a client tells them apart.
func apiErrorOf(err error) string {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &apiErr):
		return fmt.Sprintf("%d/%d %s", apiErr.Code, apiErr.ErrorCode, apiErr.Description)
	default:
		return err.Error()
	}
}

func entryOf(e jetstream.KeyValueEntry) string {
	if e == nil {
		return "<end of initial values>"
	}
	return fmt.Sprintf("%s %s=%s rev %d delta %d", e.Operation(), e.Key(), e.Value(), e.Revision(), e.Delta())
}

// liveEntryOf describes an update a watcher got while the bucket was being
// written: its delta (what the stream held past it when it was sent)
// depends on when the server sent it, so it is left out.
func liveEntryOf(e jetstream.KeyValueEntry) string {
	if e == nil {
		return "<end of initial values>"
	}
	return fmt.Sprintf("%s %s=%s rev %d", e.Operation(), e.Key(), e.Value(), e.Revision())
}

// watchUntilQuiet notes what a watcher sends, described by describe, until
// nothing comes for a while (long enough for a loaded machine).
func watchUntilQuiet(w jetstream.KeyWatcher, note func(string, ...any), describe func(jetstream.KeyValueEntry) string) {
	for {
		select {
		case e := <-w.Updates():
			note("watch: %s", describe(e))
		case <-time.After(time.Second):
			return
		}
	}
}

// KV watchers with updates only and with history; delete and purge
// markers in history, keys and watchers; PurgeDeletes.
func TestJetStreamKeyValueWatchAndMarkers(t *testing.T) {
	sameTranscripts(t, func(t *testing.T, js jetstream.JetStream, note func(string, ...any)) {
		ctx := testContext(t)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "marks", History: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", "2"}} {
			if _, err := kv.Put(ctx, p[0], []byte(p[1])); err != nil {
				t.Fatal(err)
			}
		}
		history, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
		if err != nil {
			t.Fatal(err)
		}
		defer history.Stop()
		updates, err := kv.Watch(ctx, "a", jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer updates.Stop()
		metaOnly, err := kv.WatchAll(ctx, jetstream.MetaOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer metaOnly.Stop()
		note("history watcher, initial values:")
		watchUntilQuiet(history, note, entryOf)
		note("updates-only watcher, initial values:")
		watchUntilQuiet(updates, note, entryOf)
		note("meta-only watcher, initial values:")
		watchUntilQuiet(metaOnly, note, entryOf)

		if _, err := kv.Put(ctx, "a", []byte("3")); err != nil {
			t.Fatal(err)
		}
		note("delete b: %s", apiErrorOf(kv.Delete(ctx, "b")))
		note("purge a: %s", apiErrorOf(kv.Purge(ctx, "a")))
		note("delete of a key never set: %s", apiErrorOf(kv.Delete(ctx, "never")))
		note("history watcher:")
		watchUntilQuiet(history, note, liveEntryOf)
		note("updates-only watcher:")
		watchUntilQuiet(updates, note, liveEntryOf)

		for _, key := range []string{"a", "b", "never"} {
			_, err := kv.Get(ctx, key)
			note("get %s: %v", key, errors.Is(err, jetstream.ErrKeyNotFound))
			h, err := kv.History(ctx, key)
			var entries []string
			for _, e := range h {
				entries = append(entries, entryOf(e))
			}
			note("history %s: %q %v", key, entries, err)
		}
		keys, err := kv.Keys(ctx)
		note("keys: %q %v", keys, err)
		rev, err := kv.Create(ctx, "b", []byte("again"))
		note("create over a delete marker: rev %d %s", rev, apiErrorOf(err))
		_, err = kv.Update(ctx, "a", []byte("x"), 4)
		note("update of a purged key at its last put's revision: %s", apiErrorOf(err))
		rev, err = kv.Update(ctx, "a", []byte("x"), 6)
		note("update of a purged key at the purge's revision: rev %d %s", rev, apiErrorOf(err))
		note("history watcher:")
		watchUntilQuiet(history, note, liveEntryOf)
		if _, err := kv.Put(ctx, "c", []byte("1")); err != nil {
			t.Fatal(err)
		}
		note("purge deletes: %s", apiErrorOf(kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(-1))))
		status, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		note("values after purge deletes: %d", status.Values())
		for _, key := range []string{"a", "b"} {
			_, err := kv.History(ctx, key)
			note("history %s after purge deletes: %v", key, err)
		}
		late, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
		if err != nil {
			t.Fatal(err)
		}
		defer late.Stop()
		note("a history watcher started now:")
		watchUntilQuiet(late, note, entryOf)
	})
}

// max_deliver with backoff: each redelivery waits for the next backoff
// value, none comes after max_deliver, and the consumer's info says so.
func TestJetStreamMaxDeliverWithBackoff(t *testing.T) {
	sameTranscripts(t, func(t *testing.T, js jetstream.JetStream, note func(string, ...any)) {
		ctx := testContext(t)
		s := createStream(t, js, jetstream.StreamConfig{Name: "RETRY"}, "a", "b")
		backoff := []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "r", AckPolicy: jetstream.AckExplicitPolicy,
			BackOff: backoff, MaxDeliver: 3})
		if err != nil {
			t.Fatal(err)
		}
		info := c.CachedInfo()
		note("ack wait %v, backoff %v, max deliver %d", info.Config.AckWait, info.Config.BackOff, info.Config.MaxDeliver)
		for i, maxDeliver := range []int{1, 2, 0} {
			_, err = s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprint("other", i), AckPolicy: jetstream.AckExplicitPolicy,
				BackOff: backoff, MaxDeliver: maxDeliver})
			note("backoff of 2 with max deliver %d: %s", maxDeliver, apiErrorOf(err))
		}
		_, err = s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pushed", AckPolicy: jetstream.AckNonePolicy, BackOff: backoff, MaxDeliver: 3})
		note("backoff with ack none: %s", apiErrorOf(err))

		start := time.Now()
		var gaps []time.Duration
		last := start
		for {
			m := fetchOne(t, c, 1500*time.Millisecond)
			if m == nil {
				break
			}
			d := deliveryOf(t, m)
			if d.data == "b" {
				m.Ack()
				note("b delivered %d time(s), acknowledged", d.delivered)
				continue
			}
			note("a delivered, time %d", d.delivered)
			if d.delivered > 1 {
				gaps = append(gaps, time.Since(last))
			}
			last = time.Now()
		}
		// Redeliveries wait at least their backoff value: 100ms, then
		// 400ms (the last value again beyond).
		for i, gap := range gaps {
			if want := backoff[min(i, len(backoff)-1)]; gap < want*9/10 {
				t.Errorf("redelivery %d came %v after the previous delivery, before its backoff %v", i+2, gap, want)
			}
		}
		info, err = c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		note("after max deliver: pending %d, ack pending %d, redelivered %d, delivered %d/%d, ack floor %d/%d",
			info.NumPending, info.NumAckPending, info.NumRedelivered,
			info.Delivered.Consumer, info.Delivered.Stream, info.AckFloor.Consumer, info.AckFloor.Stream)
	})
}

// deliver_policy by_start_time starts at the first message stored at or
// after the time; a time past the last message waits for new ones.
func TestJetStreamDeliverByStartTime(t *testing.T) {
	sameTranscripts(t, func(t *testing.T, js jetstream.JetStream, note func(string, ...any)) {
		ctx := testContext(t)
		s := createStream(t, js, jetstream.StreamConfig{Name: "TIMED"}, "old1", "old2")
		time.Sleep(50 * time.Millisecond) // two distinct milliseconds on either side of the start time
		startTime := time.Now()
		time.Sleep(50 * time.Millisecond)
		for _, v := range []string{"new1", "new2"} {
			if _, err := js.Publish(ctx, "timed.x", []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name string
			at   time.Time
		}{{"between", startTime}, {"future", time.Now().Add(time.Hour)}, {"past", startTime.Add(-time.Hour)}} {
			c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: tc.name, AckPolicy: jetstream.AckExplicitPolicy,
				DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &tc.at})
			if err != nil {
				t.Fatal(err)
			}
			info := c.CachedInfo()
			note("%s: pending %d, delivered %d/%d", tc.name, info.NumPending, info.Delivered.Consumer, info.Delivered.Stream)
			var got []string
			for {
				m := fetchOne(t, c, 300*time.Millisecond)
				if m == nil {
					break
				}
				got = append(got, string(m.Data()))
				m.Ack()
			}
			note("%s: %q", tc.name, got)
		}
		_, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "nostart", DeliverPolicy: jetstream.DeliverByStartTimePolicy})
		note("by start time without one: %s", apiErrorOf(err))
	})
}

// A stream update that changes subjects takes the new ones and lets the
// old go; one that lowers limits applies them at once; what may not
// change is refused with nats-server's errors.
func TestJetStreamStreamUpdate(t *testing.T) {
	sameTranscripts(t, func(t *testing.T, js jetstream.JetStream, note func(string, ...any)) {
		ctx := testContext(t)
		cfg := jetstream.StreamConfig{Name: "UPD", Subjects: []string{"upd.a.>"}}
		s := createStream(t, js, cfg)
		for i := range 6 {
			if _, err := js.Publish(ctx, fmt.Sprintf("upd.a.%d", i%2), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Subjects = []string{"upd.b.>"}
		_, err := js.UpdateStream(ctx, cfg)
		note("subjects changed: %s", apiErrorOf(err))
		_, err = js.Publish(ctx, "upd.a.0", []byte("old subject"))
		note("publish to the old subject: %v", errors.Is(err, jetstream.ErrNoStreamResponse))
		ack, err := js.Publish(ctx, "upd.b.0", []byte("new subject"))
		note("publish to the new subject: %v %s", ack, apiErrorOf(err))

		cfg.MaxMsgsPerSubject = 2
		_, err = js.UpdateStream(ctx, cfg)
		note("max msgs per subject 2: %s", apiErrorOf(err))
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		note("state: msgs %d first %d last %d deleted %d subjects %v", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq,
			info.State.NumDeleted, info.State.Subjects)
		cfg.MaxMsgs, cfg.MaxBytes = 3, 1<<20
		_, err = js.UpdateStream(ctx, cfg)
		note("max msgs 3: %s", apiErrorOf(err))
		info, err = s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		note("state: msgs %d first %d last %d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
		cfg.Discard = jetstream.DiscardNew
		_, err = js.UpdateStream(ctx, cfg)
		note("discard new: %s", apiErrorOf(err))
		_, err = js.Publish(ctx, "upd.b.1", []byte("over the limit"))
		note("publish over max msgs with discard new: %s", apiErrorOf(err))

		for _, change := range []struct {
			what string
			fn   func(*jetstream.StreamConfig)
		}{
			{"storage", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }},
			{"retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }},
			{"overlapping subjects", func(c *jetstream.StreamConfig) { c.Subjects = []string{"upd.b.>", "upd.b.x"} }},
			{"no subjects", func(c *jetstream.StreamConfig) { c.Subjects = nil }},
		} {
			bad := cfg
			change.fn(&bad)
			_, err := js.UpdateStream(ctx, bad)
			note("change %s: %s", change.what, apiErrorOf(err))
		}
		_, err = js.UpdateStream(ctx, jetstream.StreamConfig{Name: "NOSUCH", Subjects: []string{"nosuch"}})
		note("update of a missing stream: %s", apiErrorOf(err))
		createStream(t, js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
		taken := cfg
		taken.Subjects = []string{"upd.b.>", "other.x"}
		_, err = js.UpdateStream(ctx, taken)
		note("take another stream's subject: %s", apiErrorOf(err))

		cfg.MaxBytes = 400
		_, err = js.UpdateStream(ctx, cfg)
		note("max bytes 400: %s", apiErrorOf(err))
		_, err = js.Publish(ctx, "upd.b.2", make([]byte, 300))
		note("publish over max bytes with discard new: %s", apiErrorOf(err))
		cfg.MaxAge = time.Second
		_, err = js.UpdateStream(ctx, cfg)
		note("max age 1s: %s", apiErrorOf(err))
		waitFor(t, "the stream emptied by its max age", func() bool {
			info, err := s.Info(ctx)
			return err == nil && info.State.Msgs == 0
		})
		info, err = s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		note("after max age: msgs %d first %d last %d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	})
}

// max_msgs_per_subject with discard new refuses a subject's message past
// the limit when discard_new_per_subject says so, and otherwise drops
// the subject's oldest.
func TestJetStreamMaxMsgsPerSubjectDiscardNew(t *testing.T) {
	sameTranscripts(t, func(t *testing.T, js jetstream.JetStream, note func(string, ...any)) {
		ctx := testContext(t)
		for _, perSubject := range []bool{true, false} {
			name := fmt.Sprintf("PER%v", perSubject)
			cfg := jetstream.StreamConfig{Name: name, Subjects: []string{fmt.Sprintf("per%v.>", perSubject)},
				MaxMsgsPerSubject: 2, Discard: jetstream.DiscardNew, DiscardNewPerSubject: perSubject, MaxMsgs: 100}
			s, err := js.CreateStream(ctx, cfg)
			if err != nil {
				note("%s: create: %s", name, apiErrorOf(err))
				continue
			}
			for i, subj := range []string{"x", "x", "x", "y", "x"} {
				ack, err := js.Publish(ctx, fmt.Sprintf("per%v.%s", perSubject, subj), []byte(fmt.Sprint(i)))
				seq := uint64(0)
				if ack != nil {
					seq = ack.Sequence
				}
				note("%s: publish %d to %s: seq %d %s", name, i, subj, seq, apiErrorOf(err))
			}
			info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
			if err != nil {
				t.Fatal(err)
			}
			note("%s: msgs %d first %d last %d subjects %v", name, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, info.State.Subjects)
		}
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NOLIMIT", Subjects: []string{"nolimit"},
			Discard: jetstream.DiscardNew, DiscardNewPerSubject: true})
		note("discard new per subject without a per-subject limit: %s", apiErrorOf(err))
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old"},
			MaxMsgsPerSubject: 1, DiscardNewPerSubject: true})
		note("discard new per subject with discard old: %s", apiErrorOf(err))
	})
}

// The transcript comparison forgives the reference only missed watcher
// updates, never a different answer or an update Wharf missed.
func TestUpdatesMissedBy(t *testing.T) {
	full := []string{"delete b: ok", "watch: a=3", "watch: b deleted", "get a: true"}
	for _, c := range []struct {
		transcript []string
		missed     []string
		ok         bool
	}{
		{full, nil, true},
		{[]string{"delete b: ok", "watch: b deleted", "get a: true"}, []string{"watch: a=3"}, true},
		{[]string{"delete b: ok", "watch: a=3", "watch: b deleted"}, nil, false},
		{[]string{"delete b: ok", "watch: a=4", "watch: b deleted", "get a: true"}, nil, false},
		{append(slices.Clone(full), "watch: c=1"), nil, false},
	} {
		missed, ok := updatesMissedBy(c.transcript, full)
		if ok != c.ok || (ok && !slices.Equal(missed, c.missed)) {
			t.Errorf("%q: missed %q %v, want %q %v", c.transcript, missed, ok, c.missed, c.ok)
		}
	}
}
