package raft

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// testBatch is a record batch of n records of size bytes at offset base.
func testBatch(base int64, n, size int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: bytes.Repeat([]byte{byte(i)}, size)}
	}
	b := record.NewBatch(time.Now().UnixMilli(), recs)
	record.SetBaseOffset(b, base)
	return b
}

func sampleEnvelopes() []Envelope {
	cc, _ := proto.Marshal(&pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{NodeId: new(uint64(4))}}})
	return []Envelope{
		{Kind: KindRaft, Group: 7, Msg: &pb.Message{Type: pb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)),
			Term: new(uint64(3)), LogTerm: new(uint64(2)), Index: new(uint64(8)), Commit: new(uint64(0)),
			Entries: []*pb.Entry{
				{Index: new(uint64(9)), Term: new(uint64(3)), Data: testBatch(100, 3, 50)},
				{Index: new(uint64(10)), Term: new(uint64(3)), Type: pb.EntryConfChangeV2.Enum(), Data: cc},
				{Index: new(uint64(11)), Term: new(uint64(3)), Type: pb.EntryNormal.Enum()},
				{Index: new(uint64(12)), Term: new(uint64(3)), Data: []byte("not a batch")},
				{Index: new(uint64(13)), Term: new(uint64(3)), Data: testBatch(103, 1, 10)},
			}}},
		{Kind: KindRaft, Group: 7, Msg: &pb.Message{Type: pb.MsgAppResp.Enum(), To: new(uint64(1)), From: new(uint64(2)),
			Term: new(uint64(3)), Index: new(uint64(8)), Reject: new(true), RejectHint: new(uint64(5)), Context: []byte{}}},
		{Kind: KindRaft, Group: 8, Msg: &pb.Message{Type: pb.MsgSnap.Enum(), To: new(uint64(3)), Snapshot: &pb.Snapshot{
			Metadata: &pb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(2)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}}},
		{Kind: KindPing, Index: 1<<63 | 5},
		{Kind: KindQuiesce, Group: 1 << 40, Term: 5, Index: 99},
		{Kind: KindSnapshotRequest, Group: 3, Term: 2, Index: 40, Offset: 1234},
		{Kind: KindSnapshotChunk, Group: 3, Term: 2, Index: 40, Offset: 1234, Data: bytes.Repeat([]byte{7}, 3000)},
		{Kind: KindForward, Group: 1, Index: 12, Data: []byte("proposal")},
		{Kind: KindForwardReply, Group: 1, Index: 12, Offset: -1, Data: []byte("not the leader")},
	}
}

// frameOf is the frame of envs as one byte slice.
func frameOf(t testing.TB, envs []Envelope) []byte {
	var enc frameEncoder
	bufs, err := enc.encode(envs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := bufs.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFrameRoundTrip(t *testing.T) {
	want := sampleEnvelopes()
	got, _, err := readFrame(bytes.NewReader(frameOf(t, want)), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkEnvelopes(t, got, want)
}

// TestFrameCarriesTimeLeft: a forward or a call carries the time it has
// left when the frame is written, and expires that long after the frame
// is read, on the reader's clock; never later than requestTTL after,
// whatever the writer claims, and at once if it had expired.
func TestFrameCarriesTimeLeft(t *testing.T) {
	written := time.Now().Add(-time.Hour) // the writer's clock need not be the reader's
	envs := []Envelope{
		{Kind: KindForward, Group: 1, Index: 1, Data: []byte("p"), Expires: written.Add(5 * time.Second)},
		{Kind: KindCall, Group: 1, Index: 2, Data: []byte("c"), Expires: written.Add(5 * time.Second)},
		{Kind: KindCall, Group: 1, Index: 3, Expires: written.Add(time.Hour)},
		{Kind: KindForward, Group: 1, Index: 4, Expires: written.Add(-time.Second)},
	}
	var enc frameEncoder
	bufs, err := enc.encode(envs, written)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	bufs.WriteTo(&b)
	before := time.Now()
	got, _, err := readFrame(&b, nil)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	checkEnvelopes(t, got, envs)
	for i, left := range []time.Duration{5 * time.Second, 5 * time.Second, requestTTL, 0} {
		if e := got[i].Expires; e.Before(before.Add(left)) || e.After(after.Add(left)) {
			t.Errorf("envelope %d expires %v after it was read, want %v", i, e.Sub(before), left)
		}
	}
}

// checkEnvelopes fails the test unless got are want.
func checkEnvelopes(t *testing.T, got, want []Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d envelopes back, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Kind != g.Kind || w.Group != g.Group || w.Term != g.Term || w.Index != g.Index || w.Offset != g.Offset ||
			!bytes.Equal(w.Data, g.Data) || (w.Msg != nil) != (g.Msg != nil) || w.Msg != nil && !proto.Equal(w.Msg, g.Msg) {
			t.Fatalf("envelope %d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestFrameKeepsBatchesOutOfItsChecksum: the batches of a frame go
// as they are, after everything else, and only their first bytes are
// under the frame's checksum (their own CRC covers the rest).
func TestFrameKeepsBatchesOutOfItsChecksum(t *testing.T) {
	batch := testBatch(0, 10, 100)
	var enc frameEncoder
	bufs, err := enc.encode([]Envelope{{Kind: KindRaft, Group: 1, Msg: &pb.Message{Type: pb.MsgApp.Enum(),
		Entries: []*pb.Entry{{Index: new(uint64(1)), Data: batch}}}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(bufs) != 2 || &bufs[1][0] != &batch[0] {
		t.Fatalf("frame of %d buffers; want the meta part and the batch itself", len(bufs))
	}
}

// TestFrameDamage: a frame with any byte changed, or cut short, is never
// decoded into something else. Damage to a batch's records leaves out
// the envelope carrying it (the first of sampleEnvelopes), and only it;
// any other damage refuses the frame.
func TestFrameDamage(t *testing.T) {
	want := sampleEnvelopes()
	frame := frameOf(t, want)
	badBatches := 0
	for i := range frame {
		bad := bytes.Clone(frame)
		bad[i] ^= 0x40
		envs, _, err := readFrame(bytes.NewReader(bad), nil)
		switch {
		case errors.Is(err, errBadBatch):
			checkEnvelopes(t, envs, want[1:])
			badBatches++
		case err == nil:
			t.Fatalf("byte %d of %d flipped: decoded %d envelopes", i, len(frame), len(envs))
		case i >= frameHeader && !errors.Is(err, errBadFrame):
			t.Fatalf("byte %d flipped: %v, want errBadFrame", i, err)
		}
	}
	if badBatches == 0 {
		t.Fatal("no damage was taken for a batch's")
	}
	if _, _, err := readFrame(bytes.NewReader(frame[:len(frame)-1]), nil); err == nil {
		t.Fatal("a frame cut short decoded")
	}
}

// TestFrameBufferReuse: a frame without batches is read into the
// caller's buffer; one with batches into its own, which its entries
// alias, so a later frame does not overwrite them.
func TestFrameBufferReuse(t *testing.T) {
	withBatch := sampleEnvelopes()[:1]
	without := sampleEnvelopes()[3:]
	stream := append(frameOf(t, withBatch), frameOf(t, without)...)
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 1<<20)
	envs, b, err := readFrame(r, buf)
	if err != nil || &b[:1][0] != &buf[:1][0] {
		t.Fatalf("first frame: %v; buffer replaced", err)
	}
	data := envs[0].Msg.Entries[0].Data
	if _, b, err = readFrame(r, b); err != nil || &b[:1][0] != &buf[:1][0] {
		t.Fatalf("second frame: %v; buffer replaced", err)
	}
	if !bytes.Equal(data, withBatch[0].Msg.Entries[0].Data) {
		t.Fatal("a batch of the first frame changed when the second was read")
	}
	if _, _, err := readFrame(r, b); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

// appendOf is a leader's append of n batches of about 16 KiB (16
// records of 1 KiB), as a busy partition sends a follower.
func appendOf(n int) []Envelope {
	ents := make([]*pb.Entry, n)
	for i := range ents {
		ents[i] = &pb.Entry{Index: new(uint64(i + 1)), Term: new(uint64(1)), Data: testBatch(int64(16*i), 16, 1024)}
	}
	return []Envelope{{Kind: KindRaft, Group: 1, Msg: &pb.Message{Type: pb.MsgApp.Enum(), To: new(uint64(2)),
		From: new(uint64(1)), Term: new(uint64(1)), LogTerm: new(uint64(1)), Index: new(uint64(0)), Commit: new(uint64(0)),
		Entries: ents}}}
}

// BenchmarkFrame: encoding a 1 MiB append into the frame a peer is
// sent, and decoding it as the peer does.
//
//	go test ./internal/raft -run '^$' -bench Frame -benchmem
func BenchmarkFrame(b *testing.B) {
	envs := appendOf(64)
	size := 0
	for _, e := range envs[0].Msg.Entries {
		size += len(e.Data)
	}
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(size))
		var enc frameEncoder
		for b.Loop() {
			bufs, err := enc.encode(envs, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := bufs.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		frame := frameOf(b, envs)
		b.SetBytes(int64(size))
		r := bytes.NewReader(nil)
		var buf []byte
		for b.Loop() {
			r.Reset(frame)
			var err error
			if _, buf, err = readFrame(r, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
