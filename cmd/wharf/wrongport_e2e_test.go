package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// A command pointed at the wrong listener, or at one nothing listens on,
// fails at once with one line that says what is there.
func TestWrongPortSaysWhatIsThere(t *testing.T) {
	bin := wharfBinary(t)
	s := startServer(t, bin)
	dead := closedPort(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"topics", "list", "--bootstrap-server", s.amqpAddr}, s.amqpAddr + " speaks AMQP, not Kafka; Wharf's Kafka port is 9092"},
		{[]string{"topics", "list", "--bootstrap-server", s.httpAddr}, s.httpAddr + " speaks HTTP, not Kafka"},
		{[]string{"produce", "t", "--bootstrap-server", s.httpAddr}, s.httpAddr + " speaks HTTP, not Kafka"},
		{[]string{"consume", "t", "--bootstrap-server", s.amqpAddr}, s.amqpAddr + " speaks AMQP, not Kafka"},
		{[]string{"produce", "t", "--bootstrap-server", dead}, "nothing listens on " + dead + " (connection refused)"},
		{[]string{"consume", "t", "--bootstrap-server", dead}, "nothing listens on " + dead},
		{[]string{"groups", "list", "--bootstrap-server", dead}, "nothing listens on " + dead},
		{[]string{"policies", "list", "--http-server", s.addr}, s.addr + " speaks Kafka, not HTTP; Wharf's HTTP port is 15672"},
		{[]string{"policies", "list", "--http-server", s.amqpAddr}, s.amqpAddr + " speaks AMQP, not HTTP"},
		{[]string{"policies", "list", "--http-server", dead}, "nothing listens on " + dead},
		{[]string{"topics", "list", "--bootstrap-server", s.natsAddr}, s.natsAddr + " speaks NATS, not Kafka"},
		{[]string{"policies", "list", "--http-server", s.natsAddr}, s.natsAddr + " speaks NATS, not HTTP"},
	}
	for _, c := range cases {
		start := time.Now()
		r := runWharf(t, "a record\n", nil, c.args...)
		took := time.Since(start)
		if r.status != 1 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("wharf %q: status %d, stderr %q; want status 1 and one line containing %q", c.args, r.status, r.stderr, c.want)
		}
		// Before, these waited for the client's retries (10 s, a minute)
		// or forever; a probe answers at once.
		if took > 8*time.Second {
			t.Errorf("wharf %q took %v to fail", c.args, took)
		}
	}
}

// closedPort is a loopback address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
