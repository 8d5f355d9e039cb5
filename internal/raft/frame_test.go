package raft

import (
	"bytes"
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func sampleEnvelopes() []Envelope {
	return []Envelope{
		{Kind: KindRaft, Group: 7, Msg: &pb.Message{Type: pb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)),
			Term: new(uint64(3)), Entries: []*pb.Entry{{Index: new(uint64(9)), Term: new(uint64(3)), Data: []byte("batch")}}}},
		{Kind: KindPing, Index: 1<<63 | 5},
		{Kind: KindQuiesce, Group: 1 << 40, Term: 5, Index: 99},
		{Kind: KindSnapshotRequest, Group: 3, Term: 2, Index: 40, Offset: 1234},
		{Kind: KindSnapshotChunk, Group: 3, Term: 2, Index: 40, Offset: 1234, Data: bytes.Repeat([]byte{7}, 3000)},
		{Kind: KindForward, Group: 1, Index: 12, Data: []byte("proposal")},
		{Kind: KindForwardReply, Group: 1, Index: 12, Offset: -1, Data: []byte("not the leader")},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	want := sampleEnvelopes()
	frame, err := appendFrame(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := readFrame(bytes.NewReader(frame), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d envelopes back, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Kind != g.Kind || w.Group != g.Group || w.Term != g.Term || w.Index != g.Index || w.Offset != g.Offset ||
			!bytes.Equal(w.Data, g.Data) || (w.Msg != nil) != (g.Msg != nil) || w.Msg != nil && !proto.Equal(w.Msg, g.Msg) {
			t.Errorf("envelope %d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestFrameDamage: a frame with any byte of its payload changed, or cut
// short, is refused, never decoded into something else.
func TestFrameDamage(t *testing.T) {
	frame, err := appendFrame(nil, sampleEnvelopes())
	if err != nil {
		t.Fatal(err)
	}
	for i := frameHeader; i < len(frame); i += 7 {
		bad := bytes.Clone(frame)
		bad[i] ^= 0x40
		if _, _, err := readFrame(bytes.NewReader(bad), nil); !errors.Is(err, errBadFrame) {
			t.Fatalf("byte %d flipped: %v, want errBadFrame", i, err)
		}
	}
	if _, _, err := readFrame(bytes.NewReader(frame[:len(frame)-1]), nil); err == nil {
		t.Fatal("a frame cut short decoded")
	}
}
