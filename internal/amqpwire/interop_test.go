package amqpwire

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestInteropWithAMQP091Client runs the stock amqp091-go client against a
// scripted server built from this package, over an in-memory pipe: the
// handshake, a queue.declare whose arguments use every table type the client
// can send, a publish whose body spans three frames with all 14 properties,
// and two deliveries back (one forwarding the raw properties, one with a
// headers table of every type we encode). Both codecs must agree byte for
// byte for the values to come out equal on the other side.
func TestInteropWithAMQP091Client(t *testing.T) {
	clientConn, serverConn := net.Pipe()
	serverConn.SetDeadline(time.Now().Add(20 * time.Second))
	clientConn.SetDeadline(time.Now().Add(20 * time.Second))

	srv := &scriptedServer{conn: serverConn, done: make(chan struct{})}
	go srv.run()
	defer func() {
		serverConn.Close()
		<-srv.done
	}()

	conn, err := amqp.Open(clientConn, amqp.Config{
		SASL:      []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "secret"}},
		Vhost:     "/",
		FrameSize: FrameMinSize,
		Locale:    "en_US",
	})
	if err != nil {
		t.Fatalf("handshake: %v (server: %v)", err, srv.err)
	}
	if got := norm(map[string]any(conn.Properties)); !reflect.DeepEqual(got, norm(serverAllTypes())) {
		t.Errorf("server properties as the client decoded them:\n got %#v\nwant %#v", got, norm(serverAllTypes()))
	}

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("q", true, false, false, false, clientAllTypes()); err != nil {
		t.Fatal(err)
	}

	pub := amqp.Publishing{
		ContentType: "text/plain", ContentEncoding: "utf-8", Headers: amqp.Table{"h": "v", "n": int32(7)},
		DeliveryMode: amqp.Persistent, Priority: 5, CorrelationId: "corr", ReplyTo: "replies",
		Expiration: "60000", MessageId: "m1", Timestamp: time.Unix(1700000000, 0), Type: "kind",
		UserId: "guest", AppId: "app", Body: bytes.Repeat([]byte("0123456789"), 1000),
	}
	if err := ch.PublishWithContext(context.Background(), "", "q", true, false, pub); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("q", "ctag", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	d1 := <-deliveries
	if d1.ConsumerTag != "ctag" || d1.DeliveryTag != 1 || d1.RoutingKey != "q" || !bytes.Equal(d1.Body, pub.Body) {
		t.Errorf("delivery 1: tag %q/%d key %q body %d bytes", d1.ConsumerTag, d1.DeliveryTag, d1.RoutingKey, len(d1.Body))
	}
	gotProps := []any{d1.ContentType, d1.ContentEncoding, norm(map[string]any(d1.Headers)), d1.DeliveryMode, d1.Priority,
		d1.CorrelationId, d1.ReplyTo, d1.Expiration, d1.MessageId, d1.Timestamp.Unix(), d1.Type, d1.UserId, d1.AppId}
	wantProps := []any{pub.ContentType, pub.ContentEncoding, norm(map[string]any(pub.Headers)), pub.DeliveryMode, pub.Priority,
		pub.CorrelationId, pub.ReplyTo, pub.Expiration, pub.MessageId, pub.Timestamp.Unix(), pub.Type, pub.UserId, pub.AppId}
	if !reflect.DeepEqual(gotProps, wantProps) {
		t.Errorf("forwarded properties:\n got %v\nwant %v", gotProps, wantProps)
	}

	d2 := <-deliveries
	if got := norm(map[string]any(d2.Headers)); !reflect.DeepEqual(got, norm(serverAllTypes())) || !d2.Redelivered {
		t.Errorf("delivery 2 headers:\n got %#v\nwant %#v", got, norm(serverAllTypes()))
	}
	if err := d1.Ack(true); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	if srv.err != nil {
		t.Fatalf("server: %v", srv.err)
	}

	// What the server decoded from the client.
	if srv.startOK.Mechanism != "PLAIN" || srv.startOK.Response != "\x00guest\x00secret" || srv.startOK.Locale != "en_US" {
		t.Errorf("start-ok %+v", srv.startOK)
	}
	caps, _ := srv.startOK.ClientProperties["capabilities"].(Table)
	if caps["basic.nack"] != true || caps["publisher_confirms"] != true {
		t.Errorf("client capabilities %#v", srv.startOK.ClientProperties)
	}
	if srv.tuneOK.FrameMax != FrameMinSize || srv.open.VirtualHost != "/" {
		t.Errorf("tune-ok %+v open %+v", srv.tuneOK, srv.open)
	}
	if got, want := norm(srv.declare.Arguments), norm(clientAllTypesAsDecoded()); !reflect.DeepEqual(got, want) {
		t.Errorf("queue.declare arguments:\n got %#v\nwant %#v", got, want)
	}
	if srv.declare.Queue != "q" || !srv.declare.Durable || srv.declare.AutoDelete {
		t.Errorf("declare %+v", srv.declare)
	}
	if !srv.publish.Mandatory || srv.publish.RoutingKey != "q" || srv.publishBodyFrames != 3 {
		t.Errorf("publish %+v in %d body frames", srv.publish, srv.publishBodyFrames)
	}
	if srv.ack.DeliveryTag != 1 || !srv.ack.Multiple {
		t.Errorf("ack %+v", srv.ack)
	}
}

// clientAllTypes uses every Go type amqp091-go can put in a table.
func clientAllTypes() amqp.Table {
	return amqp.Table{
		"bool": true, "int8": int8(-1), "byte": byte(2), "int16": int16(-3), "uint16": uint16(4),
		"int": 5, "int32": int32(-6), "uint32": uint32(7), "int64": int64(-8),
		"float32": float32(1.5), "float64": 2.5, "decimal": amqp.Decimal{Scale: 2, Value: 314},
		"string": "s", "bytes": []byte{1, 2}, "array": []any{"a", int32(1), amqp.Table{"x": false}},
		"time": time.Unix(1234567890, 0), "table": amqp.Table{"n": "v"}, "void": nil,
	}
}

// clientAllTypesAsDecoded is clientAllTypes in this package's types: the
// client sends int as a 32-bit 'I'.
func clientAllTypesAsDecoded() Table {
	return Table{
		"bool": true, "int8": int8(-1), "byte": uint8(2), "int16": int16(-3), "uint16": uint16(4),
		"int": int32(5), "int32": int32(-6), "uint32": uint32(7), "int64": int64(-8),
		"float32": float32(1.5), "float64": 2.5, "decimal": Decimal{Scale: 2, Value: 314},
		"string": "s", "bytes": []byte{1, 2}, "array": []any{"a", int32(1), Table{"x": false}},
		"time": time.Unix(1234567890, 0).UTC(), "table": Table{"n": "v"}, "void": nil,
	}
}

// serverAllTypes uses every Go type this package encodes.
func serverAllTypes() Table {
	return Table{
		"bool": false, "int8": int8(-9), "uint8": uint8(9), "int16": int16(-10), "uint16": uint16(10),
		"int32": int32(-11), "uint32": uint32(11), "int64": int64(-12), "float32": float32(-0.5),
		"float64": 1e100, "decimal": Decimal{Scale: 3, Value: -1}, "string": "str",
		"bytes": []byte("raw"), "array": []any{Table{"in": int16(1)}, nil, "x"},
		"time": time.Unix(1600000000, 0).UTC(), "table": Table{"deeper": Table{"k": uint8(1)}}, "void": nil,
	}
}

// norm maps both packages' table types onto plain Go ones so decoded values
// can be compared: tables become map[string]any, times UTC, decimals ours.
func norm(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return norm(map[string]any(v))
	case Table:
		return norm(map[string]any(v))
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = norm(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = norm(x)
		}
		return out
	case time.Time:
		return v.UTC()
	case amqp.Decimal:
		return Decimal{Scale: v.Scale, Value: v.Value}
	}
	return v
}

// scriptedServer is just enough of a broker to drive the client through the
// scenario above, recording what it decoded.
type scriptedServer struct {
	conn net.Conn
	done chan struct{}
	err  error

	startOK           ConnectionStartOK
	tuneOK            ConnectionTuneOK
	open              ConnectionOpen
	declare           QueueDeclare
	publish           BasicPublish
	publishBodyFrames int
	ack               BasicAck
}

func (s *scriptedServer) run() {
	defer close(s.done)
	if err := s.serve(); err != nil {
		s.err = err
		s.conn.Close()
	}
}

func (s *scriptedServer) serve() error {
	br := bufio.NewReader(s.conn)
	if err := ReadProtocolHeader(br); err != nil {
		return err
	}
	fr := NewFrameReader(br, FrameMinSize)
	w := NewWriter(s.conn, 0)
	send := func(ch uint16, m Method) error {
		if err := w.WriteMethod(ch, m); err != nil {
			return err
		}
		return w.Flush()
	}
	expect := func(into Method) error {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type != FrameMethod || f.Channel != 0 {
			return fmt.Errorf("got %v frame on channel %d, want %s", f.Type, f.Channel, into.Name())
		}
		return into.Decode(f.Payload)
	}

	if err := send(0, &ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: serverAllTypes(),
		Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"}); err != nil {
		return err
	}
	if err := expect(&s.startOK); err != nil {
		return err
	}
	if err := send(0, &ConnectionTune{ChannelMax: 16, FrameMax: FrameMinSize}); err != nil {
		return err
	}
	if err := expect(&s.tuneOK); err != nil {
		return err
	}
	fr.SetFrameMax(s.tuneOK.FrameMax)
	w.SetFrameMax(s.tuneOK.FrameMax)
	if err := expect(&s.open); err != nil {
		return err
	}
	if err := send(0, &ConnectionOpenOK{}); err != nil {
		return err
	}

	assemblers := map[uint16]*Assembler{}
	var published *Content
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type == FrameBody {
			s.publishBodyFrames++
		}
		a := assemblers[f.Channel]
		if a == nil {
			a = &Assembler{}
			assemblers[f.Channel] = a
		}
		cmd, complete, err := a.Add(f)
		if err != nil {
			return err
		}
		if !complete {
			continue
		}
		ch := f.Channel
		switch m := cmd.Method.(type) {
		case *ChannelOpen:
			err = send(ch, &ChannelOpenOK{})
		case *QueueDeclare:
			s.declare = *m
			err = send(ch, &QueueDeclareOK{Queue: m.Queue})
		case *BasicPublish:
			s.publish = *m
			published = cmd.Content
		case *BasicConsume:
			if published == nil {
				return fmt.Errorf("consume before publish")
			}
			if err = w.WriteMethod(ch, &BasicConsumeOK{ConsumerTag: m.ConsumerTag}); err != nil {
				return err
			}
			deliver := &BasicDeliver{ConsumerTag: m.ConsumerTag, DeliveryTag: 1, RoutingKey: s.publish.RoutingKey}
			if err = w.WriteContentRaw(ch, deliver, published.RawProperties, published.Body); err != nil {
				return err
			}
			deliver.DeliveryTag, deliver.Redelivered = 2, true
			if err = w.WriteContent(ch, deliver, &Properties{Headers: serverAllTypes()}, []byte("second")); err != nil {
				return err
			}
			err = w.Flush()
		case *BasicAck:
			s.ack = *m
		case *ChannelClose:
			err = send(ch, &ChannelCloseOK{})
		case *ConnectionClose:
			return send(0, &ConnectionCloseOK{})
		default:
			return fmt.Errorf("unscripted method %s", m.Name())
		}
		if err != nil {
			return err
		}
	}
}
