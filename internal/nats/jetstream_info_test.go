package nats_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// jetStreamOff is what a nats.go user sees of a server without JetStream:
// INFO's "jetstream", and the errors of a JetStream call answered by
// nobody and of one nats.go maps.
func jetStreamOff(t *testing.T, s server) string {
	nc := connect(t, s)
	js, err := nc.JetStream(nats.MaxWait(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	_, accountErr := js.AccountInfo()
	_, createErr := js.AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	return fmt.Sprintf("info=%v account=%v create=%v", infoField(t, s, "jetstream"), accountErr, createErr)
}

// jetStreamAnnounced is INFO's "jetstream" of a server with JetStream.
func jetStreamAnnounced(t *testing.T, s server) string {
	return fmt.Sprintf("info=%v", infoField(t, s, "jetstream"))
}

// infoField reads the INFO s sends a new connection and returns its field
// name (nil if left out).
func infoField(t *testing.T, s server, name string) any {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testTimeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		t.Fatalf("%s: first line %q is not INFO", s.name, line)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatal(err)
	}
	return info[name]
}
