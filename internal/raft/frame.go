package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The TCP transport's frame: one batch of envelopes for many groups.
//
//	uint32 length of the payload (big endian)
//	uint32 CRC-32C (Castagnoli) of the payload
//	payload: uvarint count, then count envelopes, each
//	  byte kind, uvarint group, then by kind:
//	  raft:             uvarint length, a protobuf raftpb.Message
//	  ping:             nothing
//	  quiesce:          uvarint term, uvarint index (the commit index)
//	  snapshot-request: uvarint term, uvarint index, uvarint offset
//	  snapshot-chunk:   uvarint term, uvarint index, uvarint offset, uvarint length, bytes
//	  forward:          uvarint index (the request id), uvarint length, bytes
//	  forward-reply:    uvarint index, uvarint offset (-1 as 2^64-1), uvarint length, bytes (the error)
//
// A frame whose CRC does not match, or whose payload does not decode to
// exactly its length, breaks the connection: the receiver cannot trust
// where the next frame starts.

// frameHeader is the length and the checksum.
const frameHeader = 8

// maxFrame bounds a frame (and so a reader's allocation): a batch is cut
// well below it (maxBatchBytes), a snapshot chunk is at most
// snapshotChunkBytes.
const maxFrame = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame is a frame that failed its checks.
var errBadFrame = errors.New("raft: bad frame")

// appendFrame appends the frame of envs to dst.
func appendFrame(dst []byte, envs []Envelope) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst = binary.AppendUvarint(dst, uint64(len(envs)))
	for i := range envs {
		var err error
		if dst, err = appendEnvelope(dst, &envs[i]); err != nil {
			return dst[:start], err
		}
	}
	payload := dst[start+frameHeader:]
	if len(payload) > maxFrame {
		return dst[:start], fmt.Errorf("%w: %d bytes", errBadFrame, len(payload))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst, nil
}

func appendEnvelope(dst []byte, e *Envelope) ([]byte, error) {
	dst = append(dst, byte(e.Kind))
	dst = binary.AppendUvarint(dst, e.Group)
	switch e.Kind {
	case KindRaft:
		// Sized first, then marshalled into the frame itself: an append's
		// entries are copied once, not into a buffer of their own first.
		dst = binary.AppendUvarint(dst, uint64(proto.Size(e.Msg)))
		return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, e.Msg)
	case KindPing:
		dst = binary.AppendUvarint(dst, e.Index)
	case KindQuiesce:
		dst = binary.AppendUvarint(dst, e.Term)
		dst = binary.AppendUvarint(dst, e.Index)
	case KindSnapshotRequest, KindSnapshotChunk:
		dst = binary.AppendUvarint(dst, e.Term)
		dst = binary.AppendUvarint(dst, e.Index)
		dst = binary.AppendUvarint(dst, uint64(e.Offset))
		if e.Kind == KindSnapshotChunk {
			dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
			dst = append(dst, e.Data...)
		}
	case KindForward, KindForwardReply, KindCall, KindCallReply:
		dst = binary.AppendUvarint(dst, e.Index)
		if e.Kind == KindForwardReply || e.Kind == KindCallReply {
			dst = binary.AppendUvarint(dst, uint64(e.Offset))
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
		dst = append(dst, e.Data...)
	default:
		return dst, fmt.Errorf("raft: cannot encode an envelope of kind %v", e.Kind)
	}
	return dst, nil
}

// readFrame reads one frame from r into buf (grown as needed) and decodes
// it; the envelopes own their bytes, so buf may be read into again.
func readFrame(r io.Reader, buf []byte) ([]Envelope, []byte, error) {
	var head [frameHeader]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, buf, err
	}
	n := binary.BigEndian.Uint32(head[:4])
	if n > maxFrame {
		return nil, buf, fmt.Errorf("%w: length %d", errBadFrame, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, buf, err
	}
	if crc32.Checksum(buf, castagnoli) != binary.BigEndian.Uint32(head[4:]) {
		return nil, buf, fmt.Errorf("%w: checksum mismatch", errBadFrame)
	}
	envs, err := decodePayload(buf)
	return envs, buf, err
}

// decodePayload decodes a frame's payload.
func decodePayload(b []byte) ([]Envelope, error) {
	d := decoder{b: b}
	count := d.uvarint()
	if d.err == nil && count > uint64(len(b)) {
		d.fail("count %d", count)
	}
	var envs []Envelope
	if d.err == nil {
		envs = make([]Envelope, 0, count)
	}
	for i := uint64(0); i < count && d.err == nil; i++ {
		e := Envelope{Kind: Kind(d.byte()), Group: d.uvarint()}
		switch e.Kind {
		case KindRaft:
			m := &pb.Message{}
			if raw := d.bytes(); d.err == nil {
				if err := proto.Unmarshal(raw, m); err != nil {
					d.fail("raft message: %v", err)
				}
			}
			e.Msg = m
		case KindPing:
			e.Index = d.uvarint()
		case KindQuiesce:
			e.Term, e.Index = d.uvarint(), d.uvarint()
		case KindSnapshotRequest, KindSnapshotChunk:
			e.Term, e.Index, e.Offset = d.uvarint(), d.uvarint(), int64(d.uvarint())
			if e.Kind == KindSnapshotChunk {
				e.Data = append([]byte(nil), d.bytes()...) // the frame's buffer is read into again
			}
		case KindForward, KindForwardReply, KindCall, KindCallReply:
			e.Index = d.uvarint()
			if e.Kind == KindForwardReply || e.Kind == KindCallReply {
				e.Offset = int64(d.uvarint())
			}
			e.Data = append([]byte(nil), d.bytes()...)
		default:
			d.fail("kind %d", e.Kind)
		}
		envs = append(envs, e)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the last envelope", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return envs, nil
}

// decoder reads a payload, keeping the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errBadFrame, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("short payload")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("%d bytes announced, %d left", n, len(d.b))
	}
	if d.err != nil {
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}
