package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/record"
)

// A bare Kafka log: the least a broker does for an acks=all producer.
// It reads each produce request, checks every batch's CRC-32C, gives the
// batches offsets, appends a partition's records with one write(2) to one
// file shared by every partition, and answers once a group-committed
// fdatasync covers them; one fdatasync is in flight whenever anything
// written is not yet durable. Nothing else: no validation of the records,
// no index, no segments, no fetch. Set against Wharf with the same
// franz-go producer in the same turns it is the disk-and-client limit:
// the same protocol, the same producer's CPU on the same cores, with none
// of a broker's own work beyond that minimum.
//
// It speaks only what franz-go's producer and kadm's CreateTopic and
// DeleteTopics need: ApiVersions, Metadata, CreateTopics, DeleteTopics,
// InitProducerID and Produce up to v9 (topics by name).

// bareKafkaVersions are the requests the bare log answers and the highest
// version of each it speaks: every ApiVersions kmsg knows, since a client
// sends its own latest first.
var bareKafkaVersions = map[int16]int16{
	int16(kmsg.Produce):        9,
	int16(kmsg.Metadata):       12,
	int16(kmsg.ApiVersions):    new(kmsg.ApiVersionsRequest).MaxVersion(),
	int16(kmsg.CreateTopics):   7,
	int16(kmsg.DeleteTopics):   5,
	int16(kmsg.InitProducerID): 4,
}

// bareLog is the bare log's one file and its group commit.
type bareLog struct {
	f *os.File

	mu      sync.Mutex
	changed sync.Cond // broadcast when written, synced, err or closed change
	written int64     // bytes appended
	synced  int64     // bytes a finished fdatasync covers
	err     error     // the first failed write or fdatasync: every later wait fails
	closed  bool
	next    map[string]int64 // the next offset of each topic's partition ("topic/partition")
	topics  map[string]int32 // partition count of each topic
}

// openBareLog creates the log's file in dir and starts its syncer, which
// close stops.
func openBareLog(dir string) (*bareLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "bare.log"), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &bareLog{f: f, next: map[string]int64{}, topics: map[string]int32{}}
	l.changed.L = &l.mu
	go l.syncLoop()
	return l, nil
}

// syncLoop runs fdatasync rounds back to back while anything written is
// not yet durable, each covering all written when it started.
func (l *bareLog) syncLoop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for l.written == l.synced && !l.closed && l.err == nil {
			l.changed.Wait()
		}
		if l.closed || l.err != nil {
			return
		}
		target := l.written
		l.mu.Unlock()
		err := datasync(l.f)
		l.mu.Lock()
		if err != nil {
			l.err = err
		} else {
			l.synced = target
		}
		l.changed.Broadcast()
	}
}

// close stops the syncer and closes the file.
func (l *bareLog) close() {
	l.mu.Lock()
	l.closed = true
	l.changed.Broadcast()
	l.mu.Unlock()
	l.f.Close()
}

// append checks and numbers the batches of one partition's records and
// writes them, returning the first offset and the file position a
// durable acknowledgement waits for.
func (l *bareLog) append(topic string, partition int32, records []byte) (base, end int64, err error) {
	var batches []record.Header
	for rest := records; len(rest) > 0; {
		h, err := record.Verify(rest)
		if err != nil {
			return -1, 0, err
		}
		batches = append(batches, h)
		rest = rest[h.Size():]
	}
	if len(batches) == 0 {
		return -1, 0, errors.New("no record batches")
	}
	key := fmt.Sprintf("%s/%d", topic, partition)
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.topics[topic]; !ok || partition < 0 || partition >= n {
		return -1, 0, kerr.UnknownTopicOrPartition
	}
	base = l.next[key]
	next, pos := base, 0
	for _, h := range batches {
		record.SetBaseOffset(records[pos:], next)
		next += int64(h.LastOffsetDelta) + 1
		pos += h.Size()
	}
	if _, err := l.f.Write(records); err != nil {
		l.err = err
		l.changed.Broadcast()
		return -1, 0, err
	}
	l.next[key] = next
	l.written += int64(len(records))
	l.changed.Broadcast()
	return base, l.written, nil
}

// waitSynced waits until an fdatasync covers the file up to end.
func (l *bareLog) waitSynced(end int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.synced < end && l.err == nil && !l.closed {
		l.changed.Wait()
	}
	switch {
	case l.synced >= end:
		return nil
	case l.err != nil:
		return l.err
	}
	return errors.New("bare log closed")
}

// serveBareKafka serves the bare log on ln until ln is closed.
func serveBareKafka(ln net.Listener, l *bareLog) error {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		conns.Go(func() { serveBareConn(c, ln.Addr().(*net.TCPAddr), l) })
	}
}

// bareReply is one response on its way to the connection's writer, in
// request order: its bytes once done is closed (nil: none, acks=0).
type bareReply struct {
	done  chan struct{}
	bytes []byte
}

// serveBareConn reads requests and handles them in order; a writer
// goroutine writes the responses in the same order, a produce request's
// once its fdatasync is done.
func serveBareConn(c net.Conn, self *net.TCPAddr, l *bareLog) {
	defer c.Close()
	replies := make(chan *bareReply, 16)
	written := make(chan struct{})
	go func() {
		defer close(written)
		ok := true
		for r := range replies {
			<-r.done
			if ok && r.bytes != nil {
				_, err := c.Write(r.bytes)
				ok = err == nil
			}
		}
	}()
	defer func() {
		close(replies)
		<-written
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	var pending sync.WaitGroup // produce waits, finished before the writer's queue closes
	defer pending.Wait()
	// One frame buffer serves every request: nothing decoded from a frame
	// is kept once it is handled (the records are written by then).
	var buf []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		frame := buf[:n]
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		key, version, correlationID, req, err := decodeBareRequest(frame)
		if err != nil {
			return
		}
		r := &bareReply{done: make(chan struct{})}
		replies <- r
		resp, wait := handleBare(req, self, l)
		finish := func() {
			if resp != nil {
				r.bytes = encodeBareResponse(key, version, correlationID, resp)
			}
			close(r.done)
		}
		if wait == nil {
			finish()
			continue
		}
		pending.Go(func() {
			wait()
			finish()
		})
	}
}

// decodeBareRequest decodes a request frame the bare log answers.
func decodeBareRequest(frame []byte) (key, version int16, correlationID int32, req kmsg.Request, err error) {
	rd := kbin.Reader{Src: frame}
	key, version, correlationID = rd.Int16(), rd.Int16(), rd.Int32()
	rd.NullableString() // client ID
	if max, ok := bareKafkaVersions[key]; !ok || version > max || rd.Complete() != nil {
		return 0, 0, 0, nil, fmt.Errorf("request key %d v%d not served", key, version)
	}
	req = kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	return key, version, correlationID, req, req.ReadFrom(rd.Src)
}

// encodeBareResponse frames resp: size, correlation ID, and for flexible
// versions but ApiVersions an empty tag section.
func encodeBareResponse(key, version int16, correlationID int32, resp kmsg.Response) []byte {
	resp.SetVersion(version)
	b := kbin.AppendInt32([]byte{0, 0, 0, 0}, correlationID)
	if resp.IsFlexible() && key != int16(kmsg.ApiVersions) {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// handleBare answers req; for a produce request that waits for its
// fdatasync, wait does the waiting and fills in the response's errors.
// A nil response is an acks=0 produce, answered with nothing.
func handleBare(req kmsg.Request, self *net.TCPAddr, l *bareLog) (resp kmsg.Response, wait func()) {
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		for key, max := range bareKafkaVersions {
			v := kmsg.NewApiVersionsResponseApiKey()
			v.ApiKey, v.MaxVersion = key, max
			resp.ApiKeys = append(resp.ApiKeys, v)
		}
		return resp, nil
	case *kmsg.MetadataRequest:
		return bareMetadata(req, self, l), nil
	case *kmsg.CreateTopicsRequest:
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, t.NumPartitions, 1
			if _, exists := l.topics[t.Topic]; exists {
				rt.ErrorCode = kerr.TopicAlreadyExists.Code
			} else {
				l.topics[t.Topic] = max(t.NumPartitions, 1)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.DeleteTopicsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = &name
			delete(l.topics, name)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID = 1
		return resp, nil
	case *kmsg.ProduceRequest:
		return bareProduce(req, l)
	}
	panic(fmt.Sprintf("bare log: unexpected request %T", req))
}

// bareMetadata describes every topic asked for (all of them when the
// request names none), each partition led by this one broker.
func bareMetadata(req *kmsg.MetadataRequest, self *net.TCPAddr, l *bareLog) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.Host, b.Port = self.IP.String(), int32(self.Port)
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	resp.ControllerID = b.NodeID
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	if req.Topics == nil {
		for name := range l.topics {
			names = append(names, name)
		}
	}
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = &name
		n, ok := l.topics[name]
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		for p := range n {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Replicas, rp.ISR = p, []int32{0}, []int32{0}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// bareProduce appends every partition's records and, unless acks=0,
// answers once the fdatasync covering them is done (acks=1 too: the bare
// log has only one kind of acknowledgement).
func bareProduce(req *kmsg.ProduceRequest, l *bareLog) (kmsg.Response, func()) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var end int64
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			base, pEnd, err := l.append(t.Topic, p.Partition, p.Records)
			rp.BaseOffset, rp.ErrorCode = base, bareErrorCode(err)
			end = max(end, pEnd)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, func() {
		if err := l.waitSynced(end); err != nil {
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					resp.Topics[i].Partitions[j].ErrorCode = kerr.KafkaStorageError.Code
				}
			}
		}
	}
}

// bareErrorCode is the produce error code of an append's error.
func bareErrorCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, record.ErrCorrupt), errors.Is(err, record.ErrShort):
		return kerr.CorruptMessage.Code
	}
	return kerr.KafkaStorageError.Code
}

// bareKafkaName names the bare log in the notes.
const bareKafkaName = "a bare Kafka log"

// bareKafkaServer is the bare log run as this program re-executed with
// -bare-kafka-serve, in its own process like every server.
type bareKafkaServer struct {
	*child
	addr string
}

// startBareKafka starts the bare log's process on a free loopback port,
// its file in dir.
func (s *suite) startBareKafka(ctx context.Context, dir string) (*bareKafkaServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &bareKafkaServer{addr: loopback(port)}
	cmd := exec.Command(self, "-bare-kafka-serve", "-bare-kafka-dir", dir, "-bare-kafka-port", strconv.Itoa(port))
	b.child, err = s.procs.start("bare Kafka log", cmd, filepath.Join(s.work, "bare-kafka.log"))
	if err != nil {
		return nil, err
	}
	if err := waitForTCP(ctx, b.child, b.addr, time.Minute); err != nil {
		b.terminate(10 * time.Second)
		return nil, err
	}
	return b, nil
}

// serveBareKafkaProcess is the body of the -bare-kafka-serve child: the
// bare log on 127.0.0.1:port with its file in dir, until SIGTERM or
// SIGINT.
func serveBareKafkaProcess(dir string, port int) error {
	l, err := openBareLog(dir)
	if err != nil {
		return err
	}
	defer l.close()
	ln, err := net.Listen("tcp", loopback(port))
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ln.Close()
	}()
	return serveBareKafka(ln, l)
}
