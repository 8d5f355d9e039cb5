package amqp

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestServerPropertiesAndNegotiation(t *testing.T) {
	b := startBroker(t)
	client, err := amqp091.DialConfig(b.url(), amqp091.Config{Heartbeat: 10 * time.Second, FrameSize: 65536, ChannelMax: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	props := client.Properties
	if props["product"] != "Wharf" {
		t.Errorf("product %v", props["product"])
	}
	caps, _ := props["capabilities"].(amqp091.Table)
	for _, c := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
		"connection.blocked", "consumer_priorities", "authentication_failure_close", "per_consumer_qos", "direct_reply_to"} {
		if caps[c] != true {
			t.Errorf("capability %s = %v", c, caps[c])
		}
	}
	if client.Config.FrameSize != 65536 || client.Config.ChannelMax != 100 || client.Config.Heartbeat != 10*time.Second {
		t.Errorf("negotiated %+v", client.Config)
	}
	// The server side adopted the client's values.
	var got *conn
	b.srv.eachConn(func(c *conn) { got = c })
	if got == nil || got.frameMax != 65536 || got.channelMax != 100 || got.heartbeat != 10*time.Second {
		t.Errorf("server side: %+v", got)
	}
}

func TestAuthentication(t *testing.T) {
	b := startBroker(t)
	addUser(t, b.cfg, "app", "s3cret")
	for _, tc := range []struct {
		name string
		url  string
		sasl []amqp091.Authentication
		code int
	}{
		{"plain ok", "amqp://app:s3cret@" + b.addr + "/", nil, 0},
		{"amqplain ok", "amqp://" + b.addr + "/", []amqp091.Authentication{&amqp091.AMQPlainAuth{Username: "app", Password: "s3cret"}}, 0},
		{"wrong password", "amqp://app:nope@" + b.addr + "/", nil, amqp091.AccessRefused},
		{"unknown user", "amqp://who:nope@" + b.addr + "/", nil, amqp091.AccessRefused},
		{"missing vhost", "amqp://app:s3cret@" + b.addr + "/nope", nil, amqp091.NotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := amqp091.DialConfig(tc.url, amqp091.Config{SASL: tc.sasl})
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("connection accepted")
			}
			if tc.code == amqp091.AccessRefused {
				// amqp091-go reports a refused login as ErrCredentials
				// wrapped around the server's 403.
				if !errors.Is(err, amqp091.ErrCredentials) && !strings.Contains(err.Error(), "403") {
					t.Fatalf("got %v, want 403 ACCESS_REFUSED", err)
				}
				return
			}
			wantCode(t, err, tc.code)
		})
	}
}

func TestGuestOnlyFromLoopback(t *testing.T) {
	userStore, accessStore := newTestAuth(t)
	cfg := Config{Users: userStore, Access: accessStore}.withDefaults()
	addUser(t, cfg, "app", "pw")
	a := newAuthenticator(cfg)
	authenticate := func(mechanism, response string, addr net.Addr) (string, *authError) {
		return a.authenticate(context.Background(), login{mechanism: mechanism, response: response, remote: addr})
	}
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 5000}
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5000}
	pipe, _ := net.Pipe()
	defer pipe.Close()
	// The check fails closed: a link-local neighbour (its address has a
	// zone) and anything not TCP are not local.
	for _, addr := range []net.Addr{remote,
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 5000},
		&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 5000},
		pipe.RemoteAddr(),
		&net.UnixAddr{Name: "/run/wharf.sock", Net: "unix"},
	} {
		if _, err := authenticate("PLAIN", "\x00guest\x00guest", addr); err == nil || !strings.Contains(err.client.Text, "only connect via localhost") {
			t.Errorf("guest from %v: %v", addr, err)
		}
	}
	for _, addr := range []net.Addr{local, &net.TCPAddr{IP: net.IPv6loopback, Port: 5000}} {
		if u, err := authenticate("PLAIN", "\x00guest\x00guest", addr); err != nil || u != "guest" {
			t.Errorf("guest from %v: %q %v", addr, u, err)
		}
	}
	if u, err := authenticate("PLAIN", "\x00app\x00pw", remote); err != nil || u != "app" {
		t.Errorf("app from %v: %q %v", remote, u, err)
	}
	// EXTERNAL is offered, and taken, over TLS only.
	if _, err := authenticate("EXTERNAL", "", local); err == nil || err.client.Code != 503 {
		t.Errorf("EXTERNAL without TLS: %v", err)
	}
}

// TestShutdownClosesConnectionsWith320: Shutdown tells clients
// CONNECTION_FORCED and requeues their unacked deliveries.
func TestShutdownClosesConnectionsWith320(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch := openChannel(t, conn)
	declareQueue(t, ch, "held", true)
	publishN(t, b, "held", 1)
	if _, ok, _ := ch.Get("held", false); !ok {
		t.Fatal("get failed")
	}
	b.stop()
	if e := closeError(t, closed); e.Code != amqp091.ConnectionForced {
		t.Errorf("close %v, want 320", e)
	}
	b.start()
	if n := b.queueInfo("held").Messages; n != 1 {
		t.Errorf("after restart %d messages, want the unacked one back", n)
	}
}
