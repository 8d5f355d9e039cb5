package reliability

import (
	"errors"
	"log/slog"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestNonUTF8NamesRefused sends names that are not valid UTF-8 through
// amqp091-go (which sends a Go string's bytes as they are). Wharf stores
// definitions as JSON text, in which such a name would change at a restart
// ("q\xff" to "q\uFFFD", merging queues); RabbitMQ refuses them when it
// decodes the method. Each must close its connection with 501 FRAME_ERROR
// "Malformed UTF-8 in shortstr", as RabbitMQ does, and leave nothing
// behind; another connection is unaffected, and queues with valid UTF-8
// names of any script keep their names and messages across a restart.
func TestNonUTF8NamesRefused(t *testing.T) {
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option())
	url := nodetest.AMQPURL(n)
	bystander, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	defer bystander.Close()
	good := []string{"очередь", "キュー", "q\u00e9"}
	declareQueues(t, url, good...)
	for _, q := range good {
		publishConfirmed(t, url, &amqpLoad{queues: []string{q}, published: map[string]string{}}, 0, 1)
	}

	cases := map[string]func(*amqp.Channel) error{
		"queue.declare": func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare("q\xff", true, false, false, false, nil)
			return err
		},
		"exchange.declare": func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare("x\xff", "direct", true, false, false, false, nil)
		},
		"queue.bind": func(ch *amqp.Channel) error { return ch.QueueBind(good[0], "k\xfe", "amq.direct", false, nil) },
		"exchange.bind": func(ch *amqp.Channel) error {
			return ch.ExchangeBind("amq.fanout", "k\xff", "amq.direct", false, nil)
		},
	}
	for method, call := range cases {
		conn, ch := dialChannel(t, url)
		err := call(ch)
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != amqp.FrameError || ae.Reason != "FRAME_ERROR - Malformed UTF-8 in shortstr" || !ae.Server {
			t.Errorf("%s with a name that is not UTF-8: %v, want 501 FRAME_ERROR - Malformed UTF-8 in shortstr", method, err)
		}
		if !conn.IsClosed() {
			t.Errorf("%s: the connection is still open after a connection error", method)
		}
	}
	if bystander.IsClosed() {
		t.Fatal("another connection was closed")
	}

	closeNode(t, n)
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), newNodeLog(t, slog.LevelWarn).option())
	url = nodetest.AMQPURL(n)
	_, ch := dialChannel(t, url)
	// What q\xff would have come back as, had it been stored.
	if _, err := ch.QueueDeclarePassive("q\uFFFD", true, false, false, false, nil); err == nil {
		t.Error("a queue q\\uFFFD exists after the restart")
	}
	got := drainQueues(t, url, good)
	for _, q := range good {
		if msgs := got[q]; len(msgs) != 1 || msgs[0].id != amqpID(0, 0) {
			t.Errorf("queue %q after a restart holds %+v, want its one message", q, got[q])
		}
	}
}
