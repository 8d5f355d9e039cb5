package amqp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// addUser creates a user with every permission in the vhost "/".
func addUser(t testing.TB, cfg Config, name, password string) {
	t.Helper()
	if err := cfg.Users.Put(name, password, nil); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Access.GrantAll(name, mq.DefaultVHost); err != nil {
		t.Fatal(err)
	}
}

// dialAs connects as user (password "pw") to vhost.
func (b *testBroker) dialAs(user, vhost string) (*amqp091.Connection, error) {
	return amqp091.DialConfig(fmt.Sprintf("amqp://%s:pw@%s/%s", user, b.addr, vhost), amqp091.Config{Dial: amqp091.DefaultDial(testTimeout)})
}

// restricted starts a broker with user "app" (password "pw") whose
// permission in "/" is perm.
func restricted(t *testing.T, perm access.Permission) (*testBroker, *amqp091.Connection) {
	t.Helper()
	b := startBroker(t)
	if err := b.cfg.Users.Put("app", "pw", nil); err != nil {
		t.Fatal(err)
	}
	perm.User, perm.VHost = "app", "/"
	if err := b.cfg.Access.SetPermission(perm); err != nil {
		t.Fatal(err)
	}
	conn, err := b.dialAs("app", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return b, conn
}

// refusedOnChannel runs op on a fresh channel of conn and checks that it
// closes the channel with 403 and text.
func refusedOnChannel(t *testing.T, conn *amqp091.Connection, text string, op func(*amqp091.Channel) error) {
	t.Helper()
	ch := openChannel(t, conn)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	err := op(ch)
	if err == nil {
		// A publish learns of its refusal from channel.close.
		e := closeError(t, closed)
		err = e
	}
	if e := wantCode(t, err, amqp091.AccessRefused); e.Reason != "ACCESS_REFUSED - "+text {
		t.Fatalf("reason %q, want %q", e.Reason, text)
	}
}

// TestResourcePermissionsAsRabbitMQ: each operation needs the permission
// RabbitMQ's channel checks, and is refused with its 403 text.
func TestResourcePermissionsAsRabbitMQ(t *testing.T) {
	b, conn := restricted(t, access.Permission{Configure: "^app\\.", Write: "^app\\.", Read: "^app\\."})
	guest := b.channel()
	declareQueue(t, guest, "shared", false)
	if err := guest.ExchangeDeclare("app.x", "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	ch := openChannel(t, conn)
	declareQueue(t, ch, "app.q", false)
	if err := ch.QueueBind("app.q", "k", "app.x", false, nil); err != nil {
		t.Fatalf("bind within the permissions: %v", err)
	}
	if err := ch.Publish("app.x", "k", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ch.Get("app.q", true); err != nil || !ok {
		t.Fatalf("get within the permissions: %v %v", ok, err)
	}

	u := "in vhost '/' refused for user 'app'"
	for _, tc := range []struct {
		text string
		op   func(*amqp091.Channel) error
	}{
		{"configure access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("shared", false, false, false, false, nil)
			return err
		}},
		{"configure access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			_, err := c.QueueDelete("shared", false, false, false)
			return err
		}},
		{"read access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			_, err := c.QueuePurge("shared", false)
			return err
		}},
		{"read access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			_, err := c.Consume("shared", "", false, false, false, false, nil)
			return err
		}},
		{"read access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			_, _, err := c.Get("shared", false)
			return err
		}},
		{"write access to exchange 'amq.default' " + u, func(c *amqp091.Channel) error {
			return c.Publish("", "shared", false, false, amqp091.Publishing{Body: []byte("m")})
		}},
		{"write access to exchange 'amq.topic' " + u, func(c *amqp091.Channel) error {
			return c.Publish("amq.topic", "k", false, false, amqp091.Publishing{Body: []byte("m")})
		}},
		{"write access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			return c.QueueBind("shared", "k", "app.x", false, nil)
		}},
		{"read access to exchange 'amq.direct' " + u, func(c *amqp091.Channel) error {
			return c.QueueBind("app.q", "k", "amq.direct", false, nil)
		}},
		{"configure access to exchange 'other' " + u, func(c *amqp091.Channel) error {
			return c.ExchangeDeclare("other", "fanout", false, false, false, false, nil)
		}},
		{"configure access to queue 'shared' " + u, func(c *amqp091.Channel) error {
			_, err := c.QueueDeclarePassive("shared", false, false, false, false, nil)
			return err
		}},
		{"write access to exchange 'dlx' " + u, func(c *amqp091.Channel) error {
			_, err := c.QueueDeclare("app.dead", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": "dlx"})
			return err
		}},
	} {
		refusedOnChannel(t, conn, tc.text, tc.op)
	}
	if n := b.queueInfo("shared").Messages; n != 0 {
		t.Fatalf("a refused publish reached the queue: %d messages", n)
	}
}

// TestPublishWithoutWriteIsNotConfirmed: a confirming publisher without
// write permission gets no confirm, its channel closes with 403, and the
// connection's other channels go on.
func TestPublishWithoutWriteIsNotConfirmed(t *testing.T) {
	b, conn := restricted(t, access.Permission{Configure: ".*", Write: "^allowed$", Read: ".*"})
	declareQueue(t, b.channel(), "q", false)
	denied := openChannel(t, conn)
	if err := denied.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := denied.NotifyPublish(make(chan amqp091.Confirmation, 1))
	closed := denied.NotifyClose(make(chan *amqp091.Error, 1))
	if err := denied.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if e := closeError(t, closed); e.Code != amqp091.AccessRefused {
		t.Fatalf("close %v", e)
	}
	if c, ok := <-confirms; ok && c.Ack {
		t.Fatalf("a refused publish was confirmed: %+v", c)
	}
	other := openChannel(t, conn)
	if _, err := other.QueueDeclarePassive("q", false, false, false, false, nil); err != nil {
		t.Fatalf("the connection's next channel: %v", err)
	}
}

// TestVHostAccessRefused: connection.open of a vhost without permission
// there, or of one that does not exist, is RabbitMQ's 530 "access to
// vhost refused".
func TestVHostAccessRefused(t *testing.T) {
	b := startBroker(t)
	if err := b.cfg.Users.Put("app", "pw", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.reg.AddVHost("other"); err != nil {
		t.Fatal(err)
	}
	if err := b.cfg.Access.GrantAll("app", "other"); err != nil {
		t.Fatal(err)
	}
	for _, vhost := range []string{"", "nope"} {
		_, err := b.dialAs("app", vhost)
		name := vhost
		if name == "" {
			name = "/"
		}
		if e := wantCode(t, err, amqp091.NotAllowed); e.Reason != "NOT_ALLOWED - access to vhost '"+name+"' refused for user 'app'" {
			t.Fatalf("vhost %q: %q", name, e.Reason)
		}
	}
	conn, err := b.dialAs("app", "other")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestTopicPermissionOnPublishAndBind: a topic permission on amq.topic
// limits the routing keys published to it and the keys bound from it;
// other exchanges are not limited.
func TestTopicPermissionOnPublishAndBind(t *testing.T) {
	b, conn := restricted(t, access.Permission{Configure: ".*", Write: ".*", Read: ".*"})
	if err := b.cfg.Access.SetTopicPermission(access.TopicPermission{User: "app", VHost: "/", Exchange: "amq.topic",
		Write: "^{username}\\.", Read: "^public\\."}); err != nil {
		t.Fatal(err)
	}
	ch := openChannel(t, conn)
	declareQueue(t, ch, "q", false)
	if err := ch.QueueBind("q", "public.#", "amq.topic", false, nil); err != nil {
		t.Fatalf("bind within the read expression: %v", err)
	}
	if err := ch.Publish("amq.topic", "app.public.x", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("amq.direct", "anything", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive("q", false, false, false, false, nil); err != nil {
		t.Fatalf("the publishes within the permissions closed the channel: %v", err)
	}
	refusedOnChannel(t, conn, "write access to topic 'other.x' in exchange 'amq.topic' in vhost '/' refused for user 'app'",
		func(c *amqp091.Channel) error {
			return c.Publish("amq.topic", "other.x", false, false, amqp091.Publishing{Body: []byte("m")})
		})
	refusedOnChannel(t, conn, "write access to topic 'other.cc' in exchange 'amq.topic' in vhost '/' refused for user 'app'",
		func(c *amqp091.Channel) error {
			return c.Publish("amq.topic", "app.ok", false, false, amqp091.Publishing{Body: []byte("m"),
				Headers: amqp091.Table{"CC": []any{"other.cc"}}})
		})
	refusedOnChannel(t, conn, "read access to topic 'private.#' in exchange 'amq.topic' in vhost '/' refused for user 'app'",
		func(c *amqp091.Channel) error { return c.QueueBind("q", "private.#", "amq.topic", false, nil) })
}

// TestPermissionChangeAppliesToOpenConnections: a permission cleared
// while a connection is open refuses its next operation.
func TestPermissionChangeAppliesToOpenConnections(t *testing.T) {
	b, conn := restricted(t, access.Permission{Configure: ".*", Write: ".*", Read: ".*"})
	ch := openChannel(t, conn)
	declareQueue(t, ch, "q", false)
	if err := b.cfg.Access.SetPermission(access.Permission{User: "app", VHost: "/", Configure: ".*", Write: "", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	refusedOnChannel(t, conn, "write access to exchange 'amq.default' in vhost '/' refused for user 'app'",
		func(c *amqp091.Channel) error {
			return c.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m")})
		})
}

// TestAuthenticationFailureClose: a client announcing
// authentication_failure_close gets connection.close 403 with RabbitMQ's
// text on a refused login; one that does not has its socket closed, which
// is what a client without the capability expects.
func TestAuthenticationFailureClose(t *testing.T) {
	b := startBroker(t)
	for _, announce := range []bool{true, false} {
		nc, err := net.DialTimeout("tcp", b.addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testTimeout))
		c := &rawClient{t: t, nc: nc, fr: amqpwire.NewFrameReader(bufio.NewReader(nc), 0), w: amqpwire.NewWriter(nc, 0)}
		if _, err := io.WriteString(nc, amqpwire.ProtocolHeader); err != nil {
			t.Fatal(err)
		}
		c.expect(0, amqpwire.ConnectionStartID)
		c.send(0, &amqpwire.ConnectionStartOK{
			ClientProperties: amqpwire.Table{"capabilities": amqpwire.Table{"authentication_failure_close": announce}},
			Mechanism:        "PLAIN", Response: "\x00guest\x00not-guest", Locale: "en_US",
		})
		if !announce {
			c.expectEOF()
			continue
		}
		if text := c.expectClose(0, amqpwire.CodeAccessRefused); text != "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile." {
			t.Fatalf("close text %q", text)
		}
	}
}
