package quorumstore

import (
	"encoding/binary"
	"errors"

	"github.com/wharf-mq/wharf/internal/record"
)

// Record keys of the commands other than enqueue (an enqueue record, a
// message, has no key).
var (
	deliverKey = []byte("d")
	returnKey  = []byte("r")
	settleKey  = []byte("s")
	// truncateKey: every message below the offset it names is settled,
	// and so is every command naming one; each replica deletes its log
	// below it once the command is committed (truncate.go).
	truncateKey = []byte("t")
)

func deliverCommand(off int64) record.Record {
	return record.Record{Key: deliverKey, Value: binary.AppendUvarint(nil, uint64(off))}
}

func settleCommand(off int64) record.Record {
	return record.Record{Key: settleKey, Value: binary.AppendUvarint(nil, uint64(off))}
}

func truncateCommand(below int64) record.Record {
	return record.Record{Key: truncateKey, Value: binary.AppendUvarint(nil, uint64(below))}
}

func returnCommand(off int64, n uint32) record.Record {
	v := binary.AppendUvarint(nil, uint64(off))
	return record.Record{Key: returnKey, Value: binary.AppendUvarint(v, uint64(n))}
}

var errBadCommand = errors.New("quorumstore: malformed command record")

// decodeCommand returns the offset a command names and, for a return,
// the count.
func decodeCommand(v []byte) (off int64, n uint32, err error) {
	o, k := binary.Uvarint(v)
	if k <= 0 {
		return 0, 0, errBadCommand
	}
	if c, j := binary.Uvarint(v[k:]); j > 0 {
		n = uint32(c)
	}
	return int64(o), n, nil
}

// isMessage tells an enqueue record from a command.
func isMessage(r record.Record) bool { return r.Key == nil }

// forwardedHeader is the record header that marks the enqueue of a
// message of a forwarded publish (ForwardedAs): the forwarding node's id
// for the publish, the message's index in it, and when the leader took
// it (unix ms), as uvarints. Readers of the message ignore it
// (queuestore.DecodeMessage knows only its own headers).
const forwardedHeader = "fw"

func forwardedTag(fw ForwardedAs, takenAt int64) record.RecordHeader {
	v := binary.AppendUvarint(nil, fw.ID)
	v = binary.AppendUvarint(v, uint64(fw.Index))
	return record.RecordHeader{Key: forwardedHeader, Value: binary.AppendUvarint(v, uint64(takenAt))}
}

// forwardedOf returns the tag of a message record (forwardedTag), and
// false for a message that was not forwarded (or a malformed tag).
func forwardedOf(r record.Record) (fw ForwardedAs, takenAt int64, ok bool) {
	for _, h := range r.Headers {
		if h.Key != forwardedHeader {
			continue
		}
		v := h.Value
		var f [3]uint64
		for i := range f {
			n := 0
			if f[i], n = binary.Uvarint(v); n <= 0 {
				return ForwardedAs{}, 0, false
			}
			v = v[n:]
		}
		return ForwardedAs{ID: f[0], Index: int(f[1])}, int64(f[2]), f[0] != 0
	}
	return ForwardedAs{}, 0, false
}

// soleKey returns, from its first bytes only, the key of the one record
// batch holds (nil for a record without a key: a message), and false
// if batch holds more records, or is compressed or malformed. The
// truncator reads the small batches of one record, the ones that may be
// a truncate command (which travels alone in its batch: TruncateLocked),
// and decodes only those that are.
func soleKey(h record.Header, batch []byte) ([]byte, bool) {
	if h.LastOffsetDelta != 0 || h.Compression() != record.None || len(batch) <= record.HeaderSize {
		return nil, false
	}
	// A record: its length, attributes (one byte), timestamp delta,
	// offset delta, then the key's length (-1 for none) and the key.
	b := batch[record.HeaderSize:]
	varint := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	if _, ok := varint(); !ok || len(b) == 0 {
		return nil, false
	}
	b = b[1:]
	_, ok1 := varint()
	_, ok2 := varint()
	keyLen, ok3 := varint()
	switch {
	case !ok1 || !ok2 || !ok3 || keyLen > int64(len(b)):
		return nil, false
	case keyLen < 0:
		return nil, true
	}
	return b[:keyLen], true
}
