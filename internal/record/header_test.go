package record

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestParseHeaderDecodesFields(t *testing.T) {
	b := franzBatch(t, codecs[0], 3, franzRecords(withOffsetDeltas(sampleRecords()[:3])), transactionalBit)
	binary.BigEndian.PutUint64(b, 1234)
	binary.BigEndian.PutUint32(b[12:], 9)
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset: 1234, BatchLength: int32(len(b) - LogOverhead), PartitionLeaderEpoch: 9, Magic: 2,
		CRC: binary.BigEndian.Uint32(b[17:]), Attributes: transactionalBit, LastOffsetDelta: 2,
		BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_500,
		ProducerID: 7, ProducerEpoch: 1, BaseSequence: 100, RecordCount: 3,
	}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 1236 {
		t.Fatalf("Size %d LastOffset %d, want %d 1236", h.Size(), h.LastOffset(), len(b))
	}
	if !h.Transactional() || h.Control() || h.LogAppendTime() || h.Compression() != None {
		t.Fatalf("attribute accessors wrong for %#x", h.Attributes)
	}
}

func TestHeaderAttributeAccessors(t *testing.T) {
	h := Header{Attributes: int16(Zstd) | logAppendTimeBit | controlBit}
	if h.Compression() != Zstd || !h.LogAppendTime() || !h.Control() || h.Transactional() {
		t.Fatalf("accessors wrong for %#x", h.Attributes)
	}
	if Zstd.String() != "zstd" || Compression(6).String() != "compression(6)" {
		t.Fatalf("String: %q %q", Zstd.String(), Compression(6).String())
	}
}

func TestParseHeaderShort(t *testing.T) {
	b := NewBatch(0, sampleRecords()[:2])
	for n := range len(b) {
		h, err := ParseHeader(b[:n])
		if !errors.Is(err, ErrShort) {
			t.Fatalf("%d of %d bytes: err %v, want ErrShort", n, len(b), err)
		}
		if n >= HeaderSize && h.Size() != len(b) {
			t.Fatalf("%d bytes: Size %d, want %d so a reader knows how much to fetch", n, h.Size(), len(b))
		}
		if _, err := Validate(b[:n]); !errors.Is(err, ErrShort) {
			t.Fatalf("Validate of %d bytes: err %v, want ErrShort", n, err)
		}
	}
	// Bytes beyond the batch are not part of it.
	if _, err := Validate(append(b, 0xff, 0xff)); err != nil {
		t.Fatalf("batch followed by other bytes: %v", err)
	}
}

func TestParseHeaderCorrupt(t *testing.T) {
	tests := []struct {
		name string
		edit func(b []byte)
		msg  string
	}{
		{"magic 1", func(b []byte) { b[16] = 1 }, "magic 1"},
		{"magic 3", func(b []byte) { b[16] = 3 }, "magic 3"},
		{"batch length below header", func(b []byte) { binary.BigEndian.PutUint32(b[8:], 48) }, "batch length 48"},
		{"negative batch length", func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0xffffffff) }, "batch length -1"},
		{"negative record count", func(b []byte) { binary.BigEndian.PutUint32(b[57:], 0xfffffffe) }, "record count -2"},
		{"negative last offset delta", func(b []byte) { binary.BigEndian.PutUint32(b[23:], 0xffffffff) }, "last offset delta -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBatch(0, sampleRecords()[:2])
			tt.edit(b)
			fixCRC(b)
			_, err := ParseHeader(b)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
			if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Validate: err %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestVerifyCRC(t *testing.T) {
	b := NewBatch(0, sampleRecords())
	if _, err := Verify(b); err != nil {
		t.Fatal(err)
	}
	// Every byte from the attributes on is covered.
	for _, i := range []int{offAttributes, 40, HeaderSize, len(b) - 1} {
		c := append([]byte(nil), b...)
		c[i] ^= 0x01
		_, err := Verify(c)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "crc") {
			t.Fatalf("byte %d flipped: err %v, want ErrCorrupt about the crc", i, err)
		}
		if _, err := Validate(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Validate with byte %d flipped: err %v", i, err)
		}
		if _, err := Records(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Records with byte %d flipped: err %v", i, err)
		}
	}
	// BaseOffset and PartitionLeaderEpoch are not: the broker rewrites them.
	c := append([]byte(nil), b...)
	c[3] ^= 0xff
	c[13] ^= 0xff
	if _, err := Verify(c); err != nil {
		t.Fatalf("BaseOffset/leader epoch changed: %v", err)
	}
}
