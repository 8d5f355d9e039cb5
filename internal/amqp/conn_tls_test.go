package amqp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/tlsconf"
	"github.com/wharf-mq/wharf/internal/tlsconf/tlstest"
)

// TestAMQPSWritesDeliveriesInLargeSocketWrites: over TLS a flush of the
// connection's 64 KiB write buffer is several TLS records, which leave
// in one or two socket writes rather than a system call each.
func TestAMQPSWritesDeliveriesInLargeSocketWrites(t *testing.T) {
	b := startBroker(t)
	serverTLS, clientTLS := tlstest.SelfSigned(t)
	ln, socketIO := tlstest.Listen(t)
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(tlsconf.NewListener(ln, serverTLS)) }()
	t.Cleanup(func() {
		b.stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	conn, err := amqp091.DialTLS("amqps://guest:guest@"+ln.Addr().String()+"/", clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch := openChannel(t, conn)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 256 // 4 MiB of 16 KiB messages
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = []byte(fmt.Sprintf("%04d-%016379d", i, i))
		if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: bodies[i]}); err != nil {
			t.Fatal(err)
		}
	}
	deliveries, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case d := <-deliveries:
			if !bytes.Equal(d.Body, bodies[i]) {
				t.Fatalf("delivery %d is %.10q..., want %.10q...", i, d.Body, bodies[i])
			}
		case <-time.After(testTimeout):
			t.Fatalf("only %d of %d deliveries arrived", i, n)
		}
	}

	if total, inLarge := socketIO.Written(); inLarge < total*9/10 {
		t.Fatalf("of %d bytes written, %d went in writes of more than one TLS record; want 90%%", total, inLarge)
	}
}
