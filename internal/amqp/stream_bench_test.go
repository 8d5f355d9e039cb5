package amqp

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/streambridge"
)

// BenchmarkStreamPublishConfirm is bench/compare's stream row: one
// publishing connection, 1 KiB persistent messages to a stream queue, with
// publisher confirms and at most 256 unconfirmed; b.N messages confirmed.
func BenchmarkStreamPublishConfirm(b *testing.B) {
	const window = 256
	logger := slog.New(slog.DiscardHandler)
	br, err := broker.Open(broker.Config{DataDir: filepath.Join(b.TempDir(), "broker"), Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	reg, err := mq.Open(mq.Config{DataDir: br.DataDir(), Definitions: br.Definitions(),
		Streams: streambridge.NewTopics(br), Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	userStore, accessStore := newTestAuth(b)
	srv := NewServer(reg, Config{Logger: logger, Users: userStore, Access: accessStore})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			b.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			b.Errorf("serve: %v", err)
		}
		if err := reg.Close(); err != nil {
			b.Errorf("close registry: %v", err)
		}
		if err := br.Close(); err != nil {
			b.Errorf("close broker: %v", err)
		}
	})
	conn, err := amqp091.Dial("amqp://guest:guest@" + ln.Addr().String() + "/")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch := openChannel(b, conn)
	if _, err := ch.QueueDeclare("bench", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		b.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, window))
	slots := make(chan struct{}, window)
	done := make(chan int)
	go func() {
		nacks := 0
		for range b.N {
			if c := <-confirms; !c.Ack {
				nacks++
			}
			<-slots
		}
		done <- nacks
	}()
	payload := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for range b.N {
		slots <- struct{}{}
		if err := ch.PublishWithContext(b.Context(), "", "bench", false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: payload}); err != nil {
			b.Fatal(err)
		}
	}
	if nacks := <-done; nacks > 0 {
		b.Fatalf("%d nacks", nacks)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
