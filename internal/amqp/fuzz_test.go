package amqp

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// FuzzConn feeds arbitrary bytes to a connection after a valid handshake.
// The server must never panic or hang, whatever it makes of them; it must
// end the connection once the peer hangs up.
func FuzzConn(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	// Logging to f from inside the fuzz target is not allowed.
	// Over a pipe guest is not local: nobody is restricted to loopback.
	b := startBroker(f, func(c *Config) {
		c.Logger = slog.New(slog.DiscardHandler)
		c.LoopbackUsers = []string{}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		defer client.Close()
		finished := b.srv.netsrv.ServeConn(server)
		if finished == nil {
			t.Fatal("server refused the connection")
		}
		client.SetDeadline(time.Now().Add(testTimeout))
		if err := pipeHandshake(client); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			io.Copy(io.Discard, client)
		}()
		client.Write(data) // the server may close before taking it all
		client.Close()
		<-drained
		select {
		case <-finished:
		case <-time.After(testTimeout):
			t.Fatal("connection still served after the client hung up")
		}
	})
}

// pipeHandshake negotiates a connection over an in-memory pipe.
func pipeHandshake(nc net.Conn) error {
	fr := amqpwire.NewFrameReader(bufio.NewReader(nc), 0)
	w := amqpwire.NewWriter(nc, 0)
	send := func(m amqpwire.Method) error {
		if err := w.WriteMethod(0, m); err != nil {
			return err
		}
		return w.Flush()
	}
	skip := func() error { _, err := fr.ReadFrame(); return err }
	if _, err := io.WriteString(nc, amqpwire.ProtocolHeader); err != nil {
		return err
	}
	if err := skip(); err != nil { // start
		return err
	}
	if err := send(&amqpwire.ConnectionStartOK{Mechanism: "PLAIN", Response: "\x00guest\x00guest"}); err != nil {
		return err
	}
	if err := skip(); err != nil { // tune
		return err
	}
	if err := send(&amqpwire.ConnectionTuneOK{ChannelMax: 16, FrameMax: 16384}); err != nil {
		return err
	}
	if err := send(&amqpwire.ConnectionOpen{VirtualHost: "/"}); err != nil {
		return err
	}
	return skip() // open-ok
}

// fuzzSeeds are well-formed conversations for the fuzzer to mutate.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	build := func(fn func(w *amqpwire.Writer)) {
		var buf bytes.Buffer
		w := amqpwire.NewWriter(&buf, 0)
		fn(w)
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	build(func(w *amqpwire.Writer) {
		w.WriteMethod(1, &amqpwire.ChannelOpen{})
		w.WriteMethod(1, &amqpwire.QueueDeclare{Queue: "fuzz", Durable: true})
		w.WriteMethod(1, &amqpwire.ConfirmSelect{})
		w.WriteContent(1, &amqpwire.BasicPublish{RoutingKey: "fuzz", Mandatory: true}, &amqpwire.Properties{DeliveryMode: 2, Headers: amqpwire.Table{"k": "v"}}, []byte("hello"))
		w.WriteMethod(1, &amqpwire.BasicQos{PrefetchCount: 1})
		w.WriteMethod(1, &amqpwire.BasicConsume{Queue: "fuzz", ConsumerTag: "c"})
		w.WriteMethod(1, &amqpwire.BasicAck{DeliveryTag: 1, Multiple: true})
		w.WriteMethod(1, &amqpwire.BasicCancel{ConsumerTag: "c"})
		w.WriteMethod(1, &amqpwire.ChannelClose{})
		w.WriteMethod(0, &amqpwire.ConnectionClose{})
	})
	build(func(w *amqpwire.Writer) {
		w.WriteMethod(2, &amqpwire.ChannelOpen{})
		w.WriteMethod(2, &amqpwire.TxSelect{})
		w.WriteMethod(2, &amqpwire.ExchangeDeclare{Exchange: "fx", Type: "topic"})
		w.WriteMethod(2, &amqpwire.QueueBind{Queue: "fuzz", Exchange: "fx", RoutingKey: "a.#"})
		w.WriteContent(2, &amqpwire.BasicPublish{Exchange: "fx", RoutingKey: "a.b"}, &amqpwire.Properties{}, []byte("x"))
		w.WriteMethod(2, &amqpwire.TxCommit{})
		w.WriteMethod(2, &amqpwire.BasicGet{Queue: "fuzz"})
		w.WriteMethod(2, &amqpwire.BasicReject{DeliveryTag: 1, Requeue: true})
		w.WriteMethod(2, &amqpwire.TxRollback{})
		w.WriteMethod(2, &amqpwire.BasicRecover{Requeue: true})
	})
	build(func(w *amqpwire.Writer) {
		w.WriteMethod(1, &amqpwire.ChannelOpen{})
		w.WriteFrame(amqpwire.Frame{Type: amqpwire.FrameBody, Channel: 1, Payload: []byte("stray body")})
	})
	seeds = append(seeds, []byte{}, []byte{1, 0, 1, 0, 0, 0, 4, 0, 20, 0, 10, 0xce})
	return seeds
}
