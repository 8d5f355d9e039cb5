package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/record"
)

// The minimal fetch client: what the broker can serve, without a consumer's
// decoding. It sends sessionless Fetch requests (kmsg, v12) for every
// partition at once, one request at a time as a consumer does, reads each
// response whole into a reused buffer, decodes the response framing with
// kmsg and walks the record batch headers to learn the next offsets and the
// record count. It checks no CRC and decodes no record; everything the
// broker sent still crosses the socket into the client's memory.

// rawFetchMaxWait is the long-poll bound of its requests; the topic is full,
// so no request waits.
const rawFetchMaxWait = 500 * time.Millisecond

// rawFetch reads topic from offset 0 to ends, each partition wrapping to 0
// when it reaches its end, until lim says stop. partitionMaxBytes and
// maxBytes are the request's limits. Bytes are counted as records times
// recordSize: the topic holds only recordSize-byte values (prefill).
func rawFetch(addr, topic string, ends map[int32]int64, partitionMaxBytes, maxBytes int32, lim limit) (result, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return result{}, err
	}
	defer nc.Close()
	rf := &rawFetcher{
		nc:     nc,
		r:      bufio.NewReaderSize(nc, 64<<10),
		topic:  topic,
		ends:   ends,
		next:   make(map[int32]int64, len(ends)),
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wharf-bench-raw")),
	}
	for p, end := range ends {
		if end > 0 {
			rf.next[p] = 0
		}
	}
	if len(rf.next) == 0 {
		return result{}, errors.New("raw fetch: topic is empty")
	}
	start := time.Now()
	var records int64
	for !lim.done(records, start) {
		n, err := rf.fetchOnce(partitionMaxBytes, maxBytes)
		if err != nil {
			return result{}, fmt.Errorf("raw fetch %s: %w", topic, err)
		}
		records += n
	}
	return result{bytes: records * recordSize, records: records, elapsed: time.Since(start)}, nil
}

type rawFetcher struct {
	nc     net.Conn
	r      *bufio.Reader
	topic  string
	ends   map[int32]int64
	next   map[int32]int64 // fetch position per partition
	format *kmsg.RequestFormatter
	corr   int32
	wbuf   []byte
	rbuf   []byte
}

// fetchOnce sends one Fetch and reads its answer, returning the records it
// carried and advancing the positions.
func (rf *rawFetcher) fetchOnce(partitionMaxBytes, maxBytes int32) (int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(rawFetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1 // no session: every request names every partition
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = rf.topic
	for p, off := range rf.next {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = off
		rp.PartitionMaxBytes = partitionMaxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)

	rf.corr++
	rf.wbuf = rf.format.AppendRequest(rf.wbuf[:0], req, rf.corr)
	if _, err := rf.nc.Write(rf.wbuf); err != nil {
		return 0, err
	}
	body, err := rf.readResponse()
	if err != nil {
		return 0, err
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(req.Version)
	if err := resp.ReadFrom(body); err != nil {
		return 0, fmt.Errorf("decoding the fetch response: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	var records int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			n, next := walkBatches(p.RecordBatches, rf.next[p.Partition])
			records += n
			if next >= rf.ends[p.Partition] {
				next = 0 // read it again from the start
			}
			rf.next[p.Partition] = next
		}
	}
	return records, nil
}

// readResponse reads one size-prefixed response into the reused buffer and
// returns its body after the response header (correlation ID and, Fetch
// v12 being flexible, an empty tag section).
func (rf *rawFetcher) readResponse() ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(rf.r, prefix[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(prefix[:]))
	if cap(rf.rbuf) < size {
		rf.rbuf = make([]byte, size)
	}
	frame := rf.rbuf[:size]
	if _, err := io.ReadFull(rf.r, frame); err != nil {
		return nil, err
	}
	if size < 5 {
		return nil, fmt.Errorf("response of %d bytes", size)
	}
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != rf.corr {
		return nil, fmt.Errorf("correlation ID %d, want %d", corr, rf.corr)
	}
	return frame[5:], nil
}

// walkBatches counts the records of the whole batches in b and returns the
// offset after the last one (from if there is none).
func walkBatches(b []byte, from int64) (records, next int64) {
	next = from
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			break // a partial batch at the end, which a broker may send
		}
		records += int64(h.RecordCount)
		next = h.LastOffset() + 1
		b = b[h.Size():]
	}
	return records, next
}
