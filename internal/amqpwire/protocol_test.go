package amqpwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestProtocolHeader(t *testing.T) {
	if ProtocolHeader != "AMQP\x00\x00\x09\x01" {
		t.Fatal("header constant")
	}
	for _, ok := range []string{"AMQP\x00\x00\x09\x01", "AMQP\x01\x01\x00\x09"} {
		if err := ReadProtocolHeader(strings.NewReader(ok + "rest")); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	bad := map[string]string{
		"AMQP\x00\x00\x09\x00": "version 0-0-9-0",
		"AMQP\x01\x01\x08\x00": "version 1-1-8-0", // 0-8
		"AMQP\x00\x01\x00\x00": "version 0-1-0-0", // 1.0
		"GET / HTTP/1.1\r\n":   "not an AMQP protocol header",
	}
	for in, msg := range bad {
		err := ReadProtocolHeader(strings.NewReader(in))
		var pe *ProtocolHeaderError
		if !errors.As(err, &pe) || !bytes.Equal(pe.Header[:], []byte(in[:8])) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v", in, err)
		}
	}
	if err := ReadProtocolHeader(strings.NewReader("AMQP")); err != io.ErrUnexpectedEOF {
		t.Errorf("short: %v", err)
	}
	if err := ReadProtocolHeader(strings.NewReader("")); err != io.EOF {
		t.Errorf("empty: %v", err)
	}
}
