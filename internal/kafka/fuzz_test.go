package kafka

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// seedFrames are valid request frames (without the size prefix) of every
// API we serve, at their lowest and highest versions.
func seedFrames(tb testing.TB) [][]byte {
	var frames [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for key, vr := range apiVersions {
		for _, v := range []int16{vr.min, vr.max} {
			req := kmsg.RequestForKey(int16(key))
			req.SetVersion(v)
			frame := f.AppendRequest(nil, req, 7)
			frames = append(frames, frame[4:])
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	produce.Acks = 1
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "fuzz", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: buildBatch(tb, "x")}}}}
	frames = append(frames, f.AppendRequest(nil, produce, 8)[4:])
	fetch := fetchRequest(12, "fuzz", 0, 0)
	fetch.SessionEpoch = 0
	frames = append(frames, f.AppendRequest(nil, fetch, 9)[4:])
	return frames
}

// FuzzDecodeRequest: no frame makes request decoding panic, whatever
// decodes re-encodes, and the produce skeleton walk (request_cost.go)
// agrees with kmsg on every produce request that decodes.
func FuzzDecodeRequest(f *testing.F) {
	for _, frame := range seedFrames(f) {
		f.Add(frame)
	}
	f.Add(hostileProduce(512))
	f.Add(sparseProduce(512))
	f.Fuzz(func(t *testing.T, frame []byte) {
		hdr, msg, err := decodeRequest(frame)
		if err != nil {
			return
		}
		if msg.Key() != hdr.key || msg.GetVersion() != hdr.version {
			t.Fatalf("decoded key %d v%d from header key %d v%d", msg.Key(), msg.GetVersion(), hdr.key, hdr.version)
		}
		msg.AppendTo(nil)
		if produce, ok := msg.(*kmsg.ProduceRequest); ok {
			checkProduceDecodeSize(t, frame, produce)
		}
	})
}

// FuzzConnRequest feeds arbitrary frames through a connection's request
// handling against a real broker: nothing may panic (a recovered panic is
// logged at Error level, which fails the input). Topic and partition
// creation are skipped (they would create up to thousands of directories
// per input), and the server is shut down first so fetches never wait.
func FuzzConnRequest(f *testing.F) {
	b, err := broker.Open(broker.Config{DataDir: f.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(broker.TopicSpec{Name: "fuzz", Partitions: 2}, false); err != nil {
		f.Fatal(err)
	}
	errorsLogged := &errorCounter{}
	s := NewServer(b, Config{AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, Logger: slog.New(errorsLogged)})
	if err := s.Shutdown(context.Background()); err != nil {
		f.Fatal(err)
	}

	for _, frame := range seedFrames(f) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) >= 2 {
			switch kmsg.Key(binary.BigEndian.Uint16(frame)) {
			case kmsg.CreateTopics, kmsg.CreatePartitions, kmsg.DeleteTopics:
				return
			}
		}
		before := errorsLogged.n.Load()
		server, client := net.Pipe()
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, client)
			close(drained)
		}()
		l := s.defaultListener()
		c := newConn(s, server, &l)
		c.serveFrame(frame)
		server.Close()
		<-drained
		client.Close()
		if errorsLogged.n.Load() != before {
			t.Fatalf("serving the frame logged an error (a recovered panic)")
		}
	})
}

// errorCounter is a slog handler that counts Error records.
type errorCounter struct{ n atomic.Int64 }

func (h *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorCounter) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorCounter) WithGroup(string) slog.Handler      { return h }
