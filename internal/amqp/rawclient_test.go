package amqp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// rawClient speaks AMQP frame by frame, for what a well-behaved client
// library will not do: malformed and out-of-order frames, precise frame
// order checks.
type rawClient struct {
	t  testing.TB
	nc net.Conn
	fr *amqpwire.FrameReader
	w  *amqpwire.Writer
}

// dialRaw connects and, unless handshake is false, negotiates and opens
// the connection with frame_max 131072 and the given heartbeat.
func dialRaw(t testing.TB, addr string, heartbeat uint16) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	c := &rawClient{t: t, nc: nc, fr: amqpwire.NewFrameReader(bufio.NewReader(nc), 0), w: amqpwire.NewWriter(nc, 0)}
	c.handshake(heartbeat)
	return c
}

func (c *rawClient) handshake(heartbeat uint16) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, amqpwire.ProtocolHeader); err != nil {
		c.t.Fatal(err)
	}
	c.expect(0, amqpwire.ConnectionStartID)
	c.send(0, &amqpwire.ConnectionStartOK{
		ClientProperties: amqpwire.Table{"capabilities": amqpwire.Table{
			"connection.blocked": true, "consumer_cancel_notify": true, "authentication_failure_close": true,
		}},
		Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US",
	})
	tune := c.expect(0, amqpwire.ConnectionTuneID).(*amqpwire.ConnectionTune)
	c.send(0, &amqpwire.ConnectionTuneOK{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: heartbeat})
	c.send(0, &amqpwire.ConnectionOpen{VirtualHost: "/"})
	c.expect(0, amqpwire.ConnectionOpenOKID)
}

func (c *rawClient) send(channel uint16, m amqpwire.Method) {
	c.t.Helper()
	if err := c.w.WriteMethod(channel, m); err != nil {
		c.t.Fatal(err)
	}
	c.flush()
}

func (c *rawClient) sendContent(channel uint16, m amqpwire.Method, props *amqpwire.Properties, body []byte) {
	c.t.Helper()
	if err := c.w.WriteContent(channel, m, props, body); err != nil {
		c.t.Fatal(err)
	}
	c.flush()
}

func (c *rawClient) sendFrame(f amqpwire.Frame) {
	c.t.Helper()
	if err := c.w.WriteFrame(f); err != nil {
		c.t.Fatal(err)
	}
	c.flush()
}

func (c *rawClient) flush() {
	c.t.Helper()
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// openChannel opens channel id.
func (c *rawClient) openChannel(id uint16) {
	c.t.Helper()
	c.send(id, &amqpwire.ChannelOpen{})
	c.expect(id, amqpwire.ChannelOpenOKID)
}

// readFrame returns the next frame that is not a heartbeat; the payload
// is copied.
func (c *rawClient) readFrame() amqpwire.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if f.Type != amqpwire.FrameHeartbeat {
			f.Payload = append([]byte(nil), f.Payload...)
			return f
		}
	}
}

// readMethod returns the next method frame's channel and method, skipping
// content frames.
func (c *rawClient) readMethod() (uint16, amqpwire.Method) {
	c.t.Helper()
	for {
		f := c.readFrame()
		if f.Type != amqpwire.FrameMethod {
			continue
		}
		m, err := amqpwire.DecodeMethod(f.Payload)
		if err != nil {
			c.t.Fatalf("decode method: %v", err)
		}
		return f.Channel, m
	}
}

// expect reads the next method, which must be want on channel.
func (c *rawClient) expect(channel uint16, want amqpwire.MethodID) amqpwire.Method {
	c.t.Helper()
	ch, m := c.readMethod()
	if ch != channel || m.ID() != want {
		c.t.Fatalf("got %s on channel %d (%+v), want %s on channel %d", m.Name(), ch, m, want, channel)
	}
	return m
}

// expectClose reads until a connection.close or channel.close arrives and
// checks its reply code; it answers close-ok.
func (c *rawClient) expectClose(channel uint16, code uint16) string {
	c.t.Helper()
	for {
		ch, m := c.readMethod()
		switch m := m.(type) {
		case *amqpwire.ConnectionClose:
			if channel != 0 || m.ReplyCode != code {
				c.t.Fatalf("connection.close %d %q, want code %d on channel %d", m.ReplyCode, m.ReplyText, code, channel)
			}
			c.send(0, &amqpwire.ConnectionCloseOK{})
			return m.ReplyText
		case *amqpwire.ChannelClose:
			if ch != channel || m.ReplyCode != code {
				c.t.Fatalf("channel.close %d %q on channel %d, want code %d on channel %d", m.ReplyCode, m.ReplyText, ch, code, channel)
			}
			c.send(ch, &amqpwire.ChannelCloseOK{})
			return m.ReplyText
		}
	}
}

// expectEOF waits for the server to close the socket.
func (c *rawClient) expectEOF() {
	c.t.Helper()
	for {
		_, err := c.fr.ReadFrame()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
			return
		}
		var ne *net.OpError
		if errors.As(err, &ne) {
			return // connection reset
		}
		c.t.Fatalf("want EOF, got %v", err)
	}
}

// isTimeout reports a deadline expiry.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
