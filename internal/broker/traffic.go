package broker

import "sync/atomic"

// traffic counts a partition's record bytes in and out, for the
// bytes-per-topic metrics: one atomic add per append or fetch, summed per
// topic only when a scrape reads them.
type traffic struct {
	in  atomic.Int64 // record bytes appended, by Kafka producers and AMQP stream queues
	out atomic.Int64 // record bytes read for Kafka fetches
}

// BytesIn is the record bytes appended to the partition since the broker
// started.
func (p *Partition) BytesIn() int64 { return p.traffic.in.Load() }

// BytesOut is the record bytes Kafka consumers fetched from the partition
// since the broker started (CountFetched).
func (p *Partition) BytesOut() int64 { return p.traffic.out.Load() }

// CountFetched adds n record bytes a Kafka fetch returns to BytesOut.
func (p *Partition) CountFetched(n int64) { p.traffic.out.Add(n) }
