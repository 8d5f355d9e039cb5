package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The TCP transport's frame: one batch of envelopes for many groups.
//
//	uint32 length of the payload (big endian)
//	uint32 length of the payload's meta part
//	uint32 CRC-32C (Castagnoli) of the meta part, then of the first 21
//	       bytes of each batch in the data part
//	payload: meta, then data
//	meta: uvarint count, then count envelopes, each
//	  byte kind, uvarint group, then by kind:
//	  raft:             a Raft message (appendMessage)
//	  ping:             uvarint incarnation
//	  quiesce:          uvarint term, uvarint index (the commit index)
//	  snapshot-request: uvarint term, uvarint index, uvarint offset
//	  snapshot-chunk:   uvarint term, uvarint index, uvarint offset, uvarint length, bytes
//	  forward, call:    uvarint index (the request id), uvarint milliseconds
//	                    left before it expires, uvarint length, bytes
//	  forward-reply, call-reply:
//	                    uvarint index, uvarint offset (-1 as 2^64-1), uvarint length, bytes (the error)
//	data: the Raft entries that are record batches, back to back, in the
//	  order the meta names them.
//
// Most of a frame is entries carrying record batches, and a batch carries
// its own CRC-32C over everything from its attributes on: the frame's
// checksum covers the rest (the meta part and the 21 bytes each batch
// starts with, its offset, length, leader epoch, magic and CRC), and the
// reader verifies each batch's own. So every byte is checked once on its
// way, and a batch is checked before the follower writes it (the log then
// takes it as verified). The sender sends the batches from the entries
// themselves (writev), not copied into a buffer, and the reader's entries
// alias the frame it read.
//
// A frame whose own check fails, or whose meta part does not decode to
// exactly its length, breaks the connection: the receiver cannot trust
// where the next frame starts. An envelope with a batch whose CRC fails
// is left out (errBadBatch).

// frameHeader is the lengths and the checksum.
const frameHeader = 12

// batchPrefix is how many bytes a record batch starts with that its own
// CRC does not cover (Kafka's v2 format: base offset, length, partition
// leader epoch, magic, CRC).
const batchPrefix = 21

// maxFrame bounds a frame (and so a reader's allocation): a batch is cut
// well below it (maxBatchBytes), a snapshot chunk is at most
// snapshotChunkBytes.
const maxFrame = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame is a frame that failed its checks.
var errBadFrame = errors.New("raft: bad frame")

// errBadBatch is a frame that passed its own check, with a record batch
// that failed the batch's: the envelope carrying it is left out and the
// rest of the frame stands (its structure is sound). Damage on the way is
// then repaired as Raft sends the envelope again; a batch damaged in the
// leader's log stops only its group from reaching this follower, not
// every group sharing the connection.
var errBadBatch = errors.New("raft: a record batch failed its CRC")

// frameEncoder encodes frames, reusing its buffers from one to the next.
// A frame it returns is valid until the next encode.
type frameEncoder struct {
	meta []byte   // the header and the meta part
	data [][]byte // the data part's batches
	out  net.Buffers
}

// encode returns the frame of envs, as the buffers to write in order at
// now: the forwards and calls carry the time they have left then.
func (f *frameEncoder) encode(envs []Envelope, now time.Time) (net.Buffers, error) {
	clear(f.data) // let go of the last frame's entries
	f.meta, f.data = append(f.meta[:0], make([]byte, frameHeader)...), f.data[:0]
	f.meta = binary.AppendUvarint(f.meta, uint64(len(envs)))
	for i := range envs {
		var err error
		if f.meta, f.data, err = appendEnvelope(f.meta, f.data, &envs[i], now); err != nil {
			return nil, err
		}
	}
	meta := f.meta[frameHeader:]
	size := len(meta)
	crc := crc32.Checksum(meta, castagnoli)
	for _, b := range f.data {
		size += len(b)
		crc = crc32.Update(crc, castagnoli, b[:batchPrefix])
	}
	if size > maxFrame {
		return nil, fmt.Errorf("%w: %d bytes", errBadFrame, size)
	}
	binary.BigEndian.PutUint32(f.meta[0:], uint32(size))
	binary.BigEndian.PutUint32(f.meta[4:], uint32(len(meta)))
	binary.BigEndian.PutUint32(f.meta[8:], crc)
	clear(f.out)
	f.out = append(append(f.out[:0], f.meta), f.data...)
	return f.out, nil
}

// appendEnvelope appends e's meta to meta and its batches to data, as
// written at now.
func appendEnvelope(meta []byte, data [][]byte, e *Envelope, now time.Time) ([]byte, [][]byte, error) {
	meta = append(meta, byte(e.Kind))
	meta = binary.AppendUvarint(meta, e.Group)
	switch e.Kind {
	case KindRaft:
		return appendMessage(meta, data, e.Msg)
	case KindPing:
		meta = binary.AppendUvarint(meta, e.Index)
	case KindQuiesce:
		meta = binary.AppendUvarint(meta, e.Term)
		meta = binary.AppendUvarint(meta, e.Index)
	case KindSnapshotRequest, KindSnapshotChunk:
		meta = binary.AppendUvarint(meta, e.Term)
		meta = binary.AppendUvarint(meta, e.Index)
		meta = binary.AppendUvarint(meta, uint64(e.Offset))
		if e.Kind == KindSnapshotChunk {
			meta = appendBytes(meta, e.Data)
		}
	case KindForward, KindForwardReply, KindCall, KindCallReply:
		meta = binary.AppendUvarint(meta, e.Index)
		if e.Kind == KindForward || e.Kind == KindCall {
			meta = binary.AppendUvarint(meta, uint64(max(e.Expires.Sub(now).Milliseconds(), 0)))
		}
		if e.Kind == KindForwardReply || e.Kind == KindCallReply {
			meta = binary.AppendUvarint(meta, uint64(e.Offset))
		}
		meta = appendBytes(meta, e.Data)
	default:
		return meta, data, fmt.Errorf("raft: cannot encode an envelope of kind %v", e.Kind)
	}
	return meta, data, nil
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// The fields of a Raft message, and of an entry, that are set: a bit
// each, so that a message decodes to exactly the one encoded (etcd raft
// tells a field that is unset from one that is 0 in places).
const (
	msgType = 1 << iota
	msgTo
	msgFrom
	msgTerm
	msgLogTerm
	msgIndex
	msgCommit
	msgVote
	msgReject
	msgRejectHint
	msgContext
	msgSnapshot
)

const (
	entTerm = 1 << iota
	entIndex
	entType
	entData  // Data is not nil: in the meta part
	entBatch // Data is a record batch: in the data part
)

// appendMessage encodes m: uvarint the fields set (msg bits), their
// values in bit order (uvarints; the context as uvarint length and bytes;
// the snapshot as uvarint length and protobuf), then uvarint count and the
// entries, each uvarint the fields set (ent bits) and their values in bit
// order, data as uvarint length and, unless it is in the data part,
// bytes. Message fields etcd raft never sends a peer (Responses) are
// refused.
func appendMessage(meta []byte, data [][]byte, m *pb.Message) ([]byte, [][]byte, error) {
	if len(m.GetResponses()) > 0 {
		return meta, data, fmt.Errorf("raft: cannot send a %v message with responses", m.GetType())
	}
	var set uint64
	var vals [10]uint64
	n := 0
	opt := func(bit uint64, p *uint64) {
		if p != nil {
			set |= bit
			vals[n] = *p
			n++
		}
	}
	if m.Type != nil {
		set |= msgType
		vals[n] = uint64(*m.Type)
		n++
	}
	opt(msgTo, m.To)
	opt(msgFrom, m.From)
	opt(msgTerm, m.Term)
	opt(msgLogTerm, m.LogTerm)
	opt(msgIndex, m.Index)
	opt(msgCommit, m.Commit)
	opt(msgVote, m.Vote)
	if m.Reject != nil {
		set |= msgReject
		if *m.Reject {
			vals[n] = 1
		}
		n++
	}
	opt(msgRejectHint, m.RejectHint)
	var snap []byte
	if m.Context != nil {
		set |= msgContext
	}
	if m.Snapshot != nil {
		set |= msgSnapshot
		var err error
		if snap, err = proto.Marshal(m.Snapshot); err != nil {
			return meta, data, err
		}
	}
	meta = binary.AppendUvarint(meta, set)
	for _, v := range vals[:n] {
		meta = binary.AppendUvarint(meta, v)
	}
	if m.Context != nil {
		meta = appendBytes(meta, m.Context)
	}
	if m.Snapshot != nil {
		meta = appendBytes(meta, snap)
	}
	meta = binary.AppendUvarint(meta, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		meta, data = appendEntry(meta, data, e)
	}
	return meta, data, nil
}

func appendEntry(meta []byte, data [][]byte, e *pb.Entry) ([]byte, [][]byte) {
	var set uint64
	if e.Term != nil {
		set |= entTerm
	}
	if e.Index != nil {
		set |= entIndex
	}
	if e.Type != nil {
		set |= entType
	}
	batch := isBatch(e)
	switch {
	case batch:
		set |= entBatch
	case e.Data != nil:
		set |= entData
	}
	meta = binary.AppendUvarint(meta, set)
	if e.Term != nil {
		meta = binary.AppendUvarint(meta, *e.Term)
	}
	if e.Index != nil {
		meta = binary.AppendUvarint(meta, *e.Index)
	}
	if e.Type != nil {
		meta = binary.AppendUvarint(meta, uint64(*e.Type))
	}
	switch {
	case batch:
		meta = binary.AppendUvarint(meta, uint64(len(e.Data)))
		data = append(data, e.Data)
	case e.Data != nil:
		meta = appendBytes(meta, e.Data)
	}
	return meta, data
}

// isBatch reports whether e's data is one whole record batch, which goes
// in a frame's data part under its own CRC (a normal entry of a
// partition's log); any other data goes in the meta part.
func isBatch(e *pb.Entry) bool {
	if e.GetType() != pb.EntryNormal || len(e.Data) < record.HeaderSize {
		return false
	}
	h, err := record.ParseHeader(e.Data)
	return err == nil && h.Size() == len(e.Data)
}

// readFrame reads one frame from r and decodes it. A frame with batches
// is read into a buffer of its own, which its entries' data alias; one
// without is read into buf (grown as needed), which the caller may use
// again, and returned. With errBadBatch the envelopes are those that
// passed.
func readFrame(r io.Reader, buf []byte) ([]Envelope, []byte, error) {
	var head [frameHeader]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, buf, err
	}
	n, metaLen := binary.BigEndian.Uint32(head[0:]), binary.BigEndian.Uint32(head[4:])
	if n > maxFrame || metaLen > n {
		return nil, buf, fmt.Errorf("%w: length %d, meta %d", errBadFrame, n, metaLen)
	}
	payload := buf
	switch {
	case metaLen < n:
		payload = make([]byte, n)
	case cap(buf) < int(n):
		buf = make([]byte, n)
		payload = buf
	}
	payload = payload[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, buf, err
	}
	// Read now: a forward or a call expires the time it has left from
	// here, on this node's clock.
	envs, err := decodePayload(payload[:metaLen], payload[metaLen:], binary.BigEndian.Uint32(head[8:]), time.Now())
	return envs, buf, err
}

// decodePayload decodes a frame's meta part, read at now, and checks it,
// with the batches it names in data, against crc, then the batches' own
// CRCs.
func decodePayload(meta, data []byte, crc uint32, now time.Time) ([]Envelope, error) {
	d := decoder{b: meta, data: data}
	count := d.uvarint()
	if d.err == nil && count > uint64(len(meta)) {
		d.fail("count %d", count)
	}
	var envs []Envelope
	if d.err == nil {
		envs = make([]Envelope, 0, count)
	}
	for i := uint64(0); i < count && d.err == nil; i++ {
		d.env = len(envs)
		e := Envelope{Kind: Kind(d.byte()), Group: d.uvarint()}
		switch e.Kind {
		case KindRaft:
			e.Msg = d.message()
		case KindPing:
			e.Index = d.uvarint()
		case KindQuiesce:
			e.Term, e.Index = d.uvarint(), d.uvarint()
		case KindSnapshotRequest, KindSnapshotChunk:
			e.Term, e.Index, e.Offset = d.uvarint(), d.uvarint(), int64(d.uvarint())
			if e.Kind == KindSnapshotChunk {
				e.Data = d.copyBytes()
			}
		case KindForward, KindForwardReply, KindCall, KindCallReply:
			e.Index = d.uvarint()
			if e.Kind == KindForward || e.Kind == KindCall {
				// No longer than a sender may give (a peer's clock
				// jumping, or damage, would outlast the memories).
				left := time.Duration(min(d.uvarint(), uint64(requestTTL/time.Millisecond))) * time.Millisecond
				e.Expires = now.Add(left)
			}
			if e.Kind == KindForwardReply || e.Kind == KindCallReply {
				e.Offset = int64(d.uvarint())
			}
			e.Data = d.copyBytes()
		default:
			d.fail("kind %d", e.Kind)
		}
		envs = append(envs, e)
	}
	if d.err == nil && (len(d.b) != 0 || len(d.data) != 0) {
		d.fail("%d bytes after the last envelope, %d after the last batch", len(d.b), len(d.data))
	}
	// The checksum before the batches' own CRCs: a damaged length in the
	// meta part would have them checked at the wrong places.
	if d.err == nil {
		sum := crc32.Checksum(meta, castagnoli)
		for _, b := range d.batches {
			sum = crc32.Update(sum, castagnoli, b.data[:batchPrefix])
		}
		if sum != crc {
			d.fail("checksum mismatch")
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return verifyBatches(envs, d.batches)
}

// verifyBatches checks the batches' own CRCs and leaves out the envelopes
// of those that fail (errBadBatch).
func verifyBatches(envs []Envelope, batches []frameBatch) ([]Envelope, error) {
	var bad map[int]error
	for _, b := range batches {
		if _, err := record.Verify(b.data); err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[b.env] = err
		}
	}
	if bad == nil {
		return envs, nil
	}
	kept := envs[:0]
	var errs []error
	for i, e := range envs {
		if err, ok := bad[i]; ok {
			errs = append(errs, fmt.Errorf("%w: group %d: %w", errBadBatch, e.Group, err))
			continue
		}
		kept = append(kept, e)
	}
	return kept, errors.Join(errs...)
}

// decoder reads a frame's meta part, and takes the batches it names from
// its data part, keeping the first error.
type decoder struct {
	b, data []byte
	env     int          // the envelope being decoded
	batches []frameBatch // taken from data
	err     error
}

// frameBatch is a batch of a frame and the envelope it is in.
type frameBatch struct {
	env  int
	data []byte
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

// bytes takes length-prefixed bytes of the meta part; they alias it.
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

// copyBytes is bytes copied: the meta part's buffer is read into again.
func (d *decoder) copyBytes() []byte { return append([]byte{}, d.bytes()...) }

// batch takes a batch of length n from the data part. It aliases it, and
// its capacity reaches to the end of the frame, over the batches after it:
// a replica writes batches that lie back to back with one write, without
// copying them together (replica's appendBatches). Nothing appends to an
// entry's data.
func (d *decoder) batch(n uint64) []byte {
	if d.err == nil && (n > uint64(len(d.data)) || n < record.HeaderSize) {
		d.fail("a batch of %d bytes, %d left", n, len(d.data))
	}
	if d.err != nil {
		return nil
	}
	b := d.data[:n]
	d.data = d.data[n:]
	d.batches = append(d.batches, frameBatch{env: d.env, data: b})
	return b
}

// message decodes what appendMessage encoded.
func (d *decoder) message() *pb.Message {
	set := d.uvarint()
	m := &pb.Message{}
	opt := func(bit uint64) *uint64 {
		if set&bit == 0 || d.err != nil {
			return nil
		}
		return new(d.uvarint())
	}
	if set&msgType != 0 {
		m.Type = new(pb.MessageType(d.uvarint()))
	}
	m.To, m.From, m.Term, m.LogTerm = opt(msgTo), opt(msgFrom), opt(msgTerm), opt(msgLogTerm)
	m.Index, m.Commit, m.Vote = opt(msgIndex), opt(msgCommit), opt(msgVote)
	if set&msgReject != 0 {
		m.Reject = new(d.uvarint() != 0)
	}
	m.RejectHint = opt(msgRejectHint)
	if set&msgContext != 0 {
		m.Context = d.copyBytes()
	}
	if set&msgSnapshot != 0 {
		m.Snapshot = &pb.Snapshot{}
		if raw := d.bytes(); d.err == nil {
			if err := proto.Unmarshal(raw, m.Snapshot); err != nil {
				d.fail("snapshot: %v", err)
			}
		}
	}
	count := d.uvarint()
	if d.err == nil && count > uint64(len(d.b)) {
		d.fail("%d entries", count)
	}
	if d.err != nil || count == 0 {
		return m
	}
	// One allocation for the entries and one for their fields.
	ents := make([]pb.Entry, count)
	fields := make([]uint64, 3*count)
	m.Entries = make([]*pb.Entry, count)
	for i := range ents {
		e, f := &ents[i], fields[3*i:3*i+3]
		set := d.uvarint()
		if set&entTerm != 0 {
			f[0] = d.uvarint()
			e.Term = &f[0]
		}
		if set&entIndex != 0 {
			f[1] = d.uvarint()
			e.Index = &f[1]
		}
		if set&entType != 0 {
			f[2] = d.uvarint()
			e.Type = new(pb.EntryType(f[2]))
		}
		switch {
		case set&entBatch != 0:
			e.Data = d.batch(d.uvarint())
		case set&entData != 0:
			e.Data = d.copyBytes()
		}
		m.Entries[i] = e
	}
	return m
}
