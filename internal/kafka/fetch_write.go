package kafka

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/replica"
)

// Writing a Fetch response without copying record data through user space.
//
// The response framing must be kmsg's encoding, but the record batches
// should go from the segment files to the socket with sendfile. So the
// response is encoded with a 16-byte placeholder in each partition's
// RecordBatches field: a per-server random prefix plus the placeholder's
// index. Placeholders are found in encoding order with bytes.Index and
// checked against the length kmsg wrote before them (int32 16, or compact
// uvarint 17 in flexible versions). Then the response is written as: framing
// up to each placeholder's length field, the real length (kbin's encoding of
// the same field type), the file ranges via Slice.WriteTo (sendfile on a TCP
// connection), and so on; the size prefix is the encoded size corrected for
// the placeholders' replacement. Unlike placeholders of the real length,
// this copies no bytes proportional to the data.
//
// On a TLS connection the same plan hands the file ranges to the
// encryption as memory mappings of the segment files (writeRecordData):
// sendfile cannot carry TLS, but the record data is neither copied into
// a buffer first nor ever held whole in memory.
//
// The copy path (Slice.Bytes, a pread, into the kmsg-encoded response) is
// used when the connection is neither TCP nor TLS, when zero copy is off,
// when the data is small enough that an extra syscall costs more than the
// copy, and as a fallback if a placeholder cannot be located.

// zeroCopyMinBytes is the record data size below which a fetch response is
// copied: for a KiB or two, one write beats write+sendfile+write
// (BenchmarkFetch puts the crossover between 1 and 4 KiB).
const zeroCopyMinBytes = 4 << 10

// fetchData is the record data of one Fetch response: for each partition
// that returns records, its RecordBatches field in the response and the
// file ranges that fill it.
type fetchData struct {
	parts []fetchPart
}

type fetchPart struct {
	batches *[]byte // the partition's RecordBatches field in the response
	slice   *replica.Slice
}

func (fd *fetchData) hasData() bool { return len(fd.parts) > 0 }

// size is the total record data length.
func (fd *fetchData) size() int64 {
	var n int64
	for _, p := range fd.parts {
		n += p.slice.Len()
	}
	return n
}

// release drops the segment references of every slice.
func (fd *fetchData) release() {
	for _, p := range fd.parts {
		p.slice.Release()
	}
}

// fillBytes reads every slice into its RecordBatches field (the copy path).
func (fd *fetchData) fillBytes() error {
	for _, p := range fd.parts {
		b, err := p.slice.Bytes()
		if err != nil {
			return err
		}
		*p.batches = b
	}
	return nil
}

// markerSource makes the placeholders: a random 12-byte prefix chosen once
// per server, which no framing byte sequence will contain by accident, and a
// 4-byte index.
type markerSource struct{ prefix [12]byte }

const markerLen = 16

func newMarkerSource() markerSource {
	var m markerSource
	rand.Read(m.prefix[:])
	return m
}

func (m markerSource) marker(i int) []byte {
	b := make([]byte, markerLen)
	copy(b, m.prefix[:])
	binary.BigEndian.PutUint32(b[12:], uint32(i))
	return b
}

// writeFetch writes a Fetch response whose record data is in fd.
func (c *conn) writeFetch(correlationID int32, msg kmsg.Response, fd *fetchData) error {
	if !c.s.zeroCopy.Load() || fd.size() < zeroCopyMinBytes || !streams(c.nc) {
		return c.writeFetchCopy(correlationID, msg, fd)
	}
	markers := make([][]byte, len(fd.parts))
	for i, p := range fd.parts {
		markers[i] = c.s.markers.marker(i)
		*p.batches = markers[i]
	}
	c.wbuf = appendResponse(c.wbuf[:0], correlationID, msg)
	plan, err := planSplice(c.wbuf, markers, msg.IsFlexible())
	if err != nil {
		c.log.Warn("fetch placeholders not found; copying record data instead", "err", err)
		return c.writeFetchCopy(correlationID, msg, fd)
	}
	return withCork(c.nc, func() error { return plan.write(c.nc, c.wbuf, fd, msg.IsFlexible()) })
}

// writeFetchCopy reads the record data into the response and writes it.
func (c *conn) writeFetchCopy(correlationID int32, msg kmsg.Response, fd *fetchData) error {
	if err := fd.fillBytes(); err != nil {
		// We cannot answer without the data, and a partial answer
		// would be wrong: closing makes the client retry.
		return fmt.Errorf("reading fetch data: %w", err)
	}
	c.wbuf = appendResponse(c.wbuf[:0], correlationID, msg)
	_, err := c.nc.Write(c.wbuf)
	return err
}

// streams reports whether record data goes to nc straight from the
// files: with sendfile to a TCP socket, through the encryption to TLS.
func streams(nc net.Conn) bool {
	switch nc.(type) {
	case *net.TCPConn, *tls.Conn:
		return true
	}
	return false
}

// splicePlan locates, in an encoded response, the length field in front of
// each placeholder.
type splicePlan struct {
	fieldStart []int // where placeholder i's length field begins
	fieldLen   int   // the placeholder length field's encoded width
}

// placeholderField is the encoding kmsg gives a RecordBatches field holding
// a marker: its length then the marker.
func placeholderField(flexible bool) []byte {
	return appendBytesLen(nil, markerLen, flexible)
}

// appendBytesLen appends the length of a bytes field: int32, or the compact
// uvarint n+1 in flexible versions, as kmsg encodes RecordBatches.
func appendBytesLen(dst []byte, n int64, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, uint32(n)+1)
	}
	return kbin.AppendInt32(dst, int32(n))
}

// planSplice finds every marker, in order, in buf (a whole size-prefixed
// response) and checks the length field in front of it.
func planSplice(buf []byte, markers [][]byte, flexible bool) (splicePlan, error) {
	lenField := placeholderField(flexible)
	plan := splicePlan{fieldStart: make([]int, len(markers)), fieldLen: len(lenField)}
	from := 4 // skip the size prefix
	for i, m := range markers {
		at := bytes.Index(buf[from:], m)
		if at < 0 {
			return plan, fmt.Errorf("placeholder %d missing", i)
		}
		at += from
		start := at - len(lenField)
		if start < from || !bytes.Equal(buf[start:at], lenField) {
			return plan, fmt.Errorf("placeholder %d not preceded by its length", i)
		}
		plan.fieldStart[i] = start
		from = at + len(m)
	}
	return plan, nil
}

var errShortSliceWrite = errors.New("record data shorter than its announced length")

// write sends buf with each placeholder field replaced by the real length
// and the slice's bytes, fixing the size prefix to match.
func (p splicePlan) write(nc net.Conn, buf []byte, fd *fetchData, flexible bool) error {
	size := int64(len(buf) - 4)
	for _, part := range fd.parts {
		size += int64(len(appendBytesLen(nil, part.slice.Len(), flexible))) + part.slice.Len() - int64(p.fieldLen+markerLen)
	}
	binary.BigEndian.PutUint32(buf, uint32(size))

	var head []byte
	prev := 0
	for i, part := range fd.parts {
		head = append(head[:0], buf[prev:p.fieldStart[i]]...)
		head = appendBytesLen(head, part.slice.Len(), flexible)
		if _, err := nc.Write(head); err != nil {
			return err
		}
		n, err := writeRecordData(nc, part.slice)
		if err != nil {
			return err
		}
		if n != part.slice.Len() {
			return errShortSliceWrite
		}
		prev = p.fieldStart[i] + p.fieldLen + markerLen
	}
	_, err := nc.Write(buf[prev:])
	return err
}

// writeRecordData writes a slice's record data to nc: to a TCP connection
// with sendfile; to a TLS connection straight from the mapped segment
// files (Slice.WriteMappedTo), so that crypto/tls encrypts the page cache
// itself rather than a copy of it read into a buffer first.
func writeRecordData(nc net.Conn, s *replica.Slice) (int64, error) {
	if _, ok := nc.(*tls.Conn); ok {
		return s.WriteMappedTo(nc)
	}
	return s.WriteTo(nc)
}
