package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

type fakeIdleConn struct{ closed *atomic.Int64 }

func (f fakeIdleConn) alive() bool { return true }
func (f fakeIdleConn) close()      { f.closed.Add(1) }

func TestOpenIdleStopsAtFirstRefusal(t *testing.T) {
	var dialed, closed atomic.Int64
	refusal := errors.New("connection refused")
	dial := func(context.Context) (idleConn, error) {
		if dialed.Add(1) > 100 {
			return nil, refusal
		}
		return fakeIdleConn{&closed}, nil
	}
	conns, err := openIdle(context.Background(), 1000, dial)
	if !errors.Is(err, refusal) {
		t.Fatalf("err = %v, want the refusal", err)
	}
	if len(conns) != 100 {
		t.Fatalf("opened %d, want the 100 accepted before the refusal", len(conns))
	}
	closeIdle(conns)
	if closed.Load() != 100 {
		t.Fatalf("closed %d of 100", closed.Load())
	}
}

func TestOpenIdleOpensExactlyN(t *testing.T) {
	var closed atomic.Int64
	dial := func(context.Context) (idleConn, error) { return fakeIdleConn{&closed}, nil }
	conns, err := openIdle(context.Background(), 37, dial)
	if err != nil || len(conns) != 37 {
		t.Fatalf("openIdle = %d conns, %v; want 37, nil", len(conns), err)
	}
	if got := countAlive(conns); got != 37 {
		t.Fatalf("countAlive = %d, want 37", got)
	}
}

// The bare Kafka connection completes ApiVersions and Metadata against a
// real Kafka implementation and notices when the broker goes away.
func TestKafkaHandshakeAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := dialKafkaHandshake(ctx, c.ListenAddrs()[0])
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	defer k.close()
	if !k.alive() {
		t.Fatal("connection not alive right after the handshake")
	}
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for k.alive() {
		if time.Now().After(deadline) {
			t.Fatal("connection still alive 10 s after the broker closed")
		}
	}
}

func TestSkipTaggedFields(t *testing.T) {
	// Two tags: tag 0 with 2 bytes, tag 5 with 0 bytes, then the body.
	b := []byte{2, 0, 2, 0xaa, 0xbb, 5, 0, 0x42}
	rest, err := skipTaggedFields(b)
	if err != nil || len(rest) != 1 || rest[0] != 0x42 {
		t.Fatalf("skipTaggedFields = %x, %v; want 42, nil", rest, err)
	}
	if _, err := skipTaggedFields([]byte{1, 0, 9, 0}); err == nil {
		t.Fatal("a field longer than the input was accepted")
	}
}

func TestSectionSelection(t *testing.T) {
	for _, tc := range []struct {
		only  string
		scale bool
		want  map[string]bool // section -> runs
	}{
		{"", false, map[string]bool{"kafka": true, "idle": false, "scale": false}},
		{"", true, map[string]bool{"kafka": true, "idle": true, "catchup": true, "scale": true}},
		{"idle", false, map[string]bool{"kafka": false, "idle": true, "catchup": false}},
		{"amqp", true, map[string]bool{"amqp": true, "kafka": false, "idle": true, "scale": true}},
	} {
		s := &suite{opts: options{only: tc.only, scale: tc.scale}}
		for name, want := range tc.want {
			scale := name == "idle" || name == "catchup" || name == "scale"
			if got := s.selected(name, scale); got != want {
				t.Errorf("-only %q -scale=%v: %s runs = %v, want %v", tc.only, tc.scale, name, got, want)
			}
		}
	}
}
