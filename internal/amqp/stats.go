package amqp

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
)

// Message statistics, RabbitMQ's message_stats of a channel: each event is
// one atomic add on the channel's own counter, and rates are worked out
// when somebody reads them (internal/rate). The server's totals are the
// live channels' counters plus those of the channels already closed.

// msgStat names one counter of a channel.
type msgStat int

const (
	statPublish          msgStat = iota // basic.publish routed (or dropped, or returned)
	statConfirm                         // publisher confirms (basic.ack) sent
	statReturnUnroutable                // unroutable mandatory messages returned
	statDropUnroutable                  // unroutable messages dropped
	statDeliver                         // deliveries to consumers awaiting ack
	statDeliverNoAck                    // deliveries to no-ack consumers
	statGet                             // basic.get-ok awaiting ack
	statGetNoAck                        // basic.get-ok with no-ack
	statGetEmpty                        // basic.get-empty
	statRedeliver                       // deliveries and gets of redelivered messages
	statAck                             // deliveries acknowledged
	numMsgStats
)

// msgStatNames are RabbitMQ's names of the counters.
var msgStatNames = [numMsgStats]string{
	"publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
	"get", "get_no_ack", "get_empty", "redeliver", "ack",
}

// msgCounters are one channel's counters.
type msgCounters [numMsgStats]atomic.Uint64

func (m *msgCounters) add(s msgStat, n uint64) { m[s].Add(n) }

// values reads the counters.
func (m *msgCounters) values() (v [numMsgStats]int64) {
	for i := range m {
		v[i] = int64(m[i].Load())
	}
	return v
}

// messageStats turns counter values into RabbitMQ's message_stats, with
// deliver_get (deliveries and gets of both kinds together) after get_empty,
// and their rates sampled by s at now.
func messageStats(v [numMsgStats]int64, s *rate.Sampler, now time.Time) []rate.Stat {
	stats := make([]rate.Stat, 0, numMsgStats+1)
	for i, name := range msgStatNames {
		stats = append(stats, rate.Stat{Name: name, Value: v[i]})
		if msgStat(i) == statGetEmpty {
			stats = append(stats, rate.Stat{Name: "deliver_get",
				Value: v[statDeliver] + v[statDeliverNoAck] + v[statGet] + v[statGetNoAck]})
		}
	}
	s.Sample(now, stats)
	return stats
}

// countPublished counts a publish by its routing outcome.
func (ch *channel) countPublished(res mq.PublishResult, mandatory bool) {
	ch.stats.add(statPublish, 1)
	switch {
	case res.Routed > 0:
	case mandatory:
		ch.stats.add(statReturnUnroutable, 1)
	default:
		ch.stats.add(statDropUnroutable, 1)
	}
}

// countHandedOver counts a delivery (consumer true) or a basic.get-ok.
func (ch *channel) countHandedOver(consumer, noAck, redelivered bool) {
	switch {
	case consumer && noAck:
		ch.stats.add(statDeliverNoAck, 1)
	case consumer:
		ch.stats.add(statDeliver, 1)
	case noAck:
		ch.stats.add(statGetNoAck, 1)
	default:
		ch.stats.add(statGet, 1)
	}
	if redelivered {
		ch.stats.add(statRedeliver, 1)
	}
}

// serverStats keeps the counters of closed channels, so the server's
// totals never go down.
type serverStats struct {
	mu      sync.Mutex
	retired [numMsgStats]int64
	sampler rate.Sampler
}

// retire adds a closing channel's counters to the server's totals, once.
// Until then the channel is counted live; events after it are not
// counted. No channel lock may be held.
func (s *Server) retire(ch *channel) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	if ch.retired {
		return
	}
	ch.retired = true
	v := ch.stats.values()
	for i := range v {
		s.stats.retired[i] += v[i]
	}
}

// MessageStats is RabbitMQ's message_stats of the whole node: every
// channel's counters since the server started, with their rates.
func (s *Server) MessageStats() []rate.Stat {
	var chans []*channel
	s.eachConn(func(c *conn) { chans = append(chans, c.openChannels()...) })
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	total := s.stats.retired
	for _, ch := range chans {
		if ch.retired {
			continue
		}
		v := ch.stats.values()
		for i := range v {
			total[i] += v[i]
		}
	}
	return messageStats(total, &s.stats.sampler, time.Now())
}

// trafficReader counts the bytes a connection's reader takes from its
// socket (RabbitMQ's recv_oct).
type trafficReader struct {
	nc net.Conn
	n  atomic.Uint64
}

func (r *trafficReader) Read(p []byte) (int, error) {
	n, err := r.nc.Read(p)
	r.n.Add(uint64(n))
	return n, err
}

// trafficWriter counts the bytes and writes a connection's writer sends
// (send_oct, send_cnt).
type trafficWriter struct {
	nc     net.Conn
	n, cnt atomic.Uint64
}

func (w *trafficWriter) Write(p []byte) (int, error) {
	n, err := w.nc.Write(p)
	w.n.Add(uint64(n))
	w.cnt.Add(1)
	return n, err
}
