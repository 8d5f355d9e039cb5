package amqpwire

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// publishStream is one basic.publish with a header and a 512-byte body, as
// a client sends it.
func publishStream(b *testing.B) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	props := Properties{ContentType: "application/json", DeliveryMode: 2, Headers: Table{"trace": "abc"}}
	if err := w.WriteContent(1, &BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created"}, &props, make([]byte, 512)); err != nil {
		b.Fatal(err)
	}
	w.Flush()
	return buf.Bytes()
}

// repeatReader serves the same bytes forever.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.data[r.off:])
		n += c
		r.off = (r.off + c) % len(r.data)
	}
	return n, nil
}

// BenchmarkReadPublish: frames to a complete Command, the receive hot path.
func BenchmarkReadPublish(b *testing.B) {
	stream := publishStream(b)
	fr := NewFrameReader(bufio.NewReaderSize(&repeatReader{data: stream}, 64<<10), 131072)
	var a Assembler
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			_, done, err := a.Add(f)
			if err != nil {
				b.Fatal(err)
			}
			if done {
				break
			}
		}
	}
}

// BenchmarkDecodePublishReused: basic.publish decoded into a reused struct
// after PeekMethodID, the cheapest way to take a publish.
func BenchmarkDecodePublishReused(b *testing.B) {
	payload, _ := (&BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created"}).Encode(nil)
	var p BasicPublish
	b.ReportAllocs()
	for b.Loop() {
		if id, _ := PeekMethodID(payload); id != BasicPublishID {
			b.Fatal(id)
		}
		if err := p.Decode(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteDeliver: basic.deliver + header (raw properties) + body into
// the batching writer, the send hot path.
func BenchmarkWriteDeliver(b *testing.B) {
	w := NewWriter(io.Discard, 0)
	w.SetFrameMax(131072)
	props, _ := (&Properties{ContentType: "application/json", DeliveryMode: 2}).Encode(nil)
	body := make([]byte, 512)
	d := &BasicDeliver{ConsumerTag: "amq.ctag-abc", Exchange: "amq.topic", RoutingKey: "orders.eu.created"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d.DeliveryTag++
		if err := w.WriteContentRaw(1, d, props, body); err != nil {
			b.Fatal(err)
		}
	}
}
