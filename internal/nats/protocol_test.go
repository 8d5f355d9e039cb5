package nats_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A protocolCase sends raw protocol to a server and expects nats-server's
// exact reply. INFO lines in the reply are compared as "INFO {...}".
type protocolCase struct {
	name   string
	limits limits
	input  string
	want   string
	// closes: the server closes the connection after want; otherwise
	// the reply is read until it holds as many PONGs as want does.
	closes bool
}

var protocolCases = []protocolCase{
	{name: "verbose CONNECT and PING", input: "CONNECT {\"verbose\":true}\r\nPING\r\n", want: "+OK\r\nPONG\r\n"},
	{name: "CONNECT defaults to verbose", input: "CONNECT {}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n",
		want: "+OK\r\n+OK\r\n+OK\r\nMSG a 1 1\r\nx\r\nPONG\r\n"},
	{name: "operations before CONNECT", input: "SUB foo 1\r\nPUB foo 1\r\nx\r\nPING\r\n", want: "+OK\r\n+OK\r\nMSG foo 1 1\r\nx\r\nPONG\r\n"},
	{name: "PING before CONNECT", input: "PING\r\n", want: "PONG\r\n"},
	{name: "INFO after the first PONG of a protocol 1 client", input: "CONNECT {\"protocol\":1,\"verbose\":true}\r\nPING\r\nPING\r\n",
		want: "+OK\r\nPONG\r\nINFO {...}\r\nPONG\r\n"},
	{name: "lower-case operations", input: "connect {\"verbose\":false}\r\nsub foo 1\r\npub foo 1\r\nx\r\nping\r\n", want: "MSG foo 1 1\r\nx\r\nPONG\r\n"},
	{name: "bare LF line ends and extra blanks", input: "CONNECT {\"verbose\":false}\nSUB\tfoo \t 1\nPUB \t foo   1\nx\r\nPING\n", want: "MSG foo 1 1\r\nx\r\nPONG\r\n"},
	{name: "trailing bytes after PING", input: "PINGXYZ\r\n", want: "PONG\r\n"},
	{name: "client +OK and INFO are ignored", input: "CONNECT {\"verbose\":false}\r\n+OK\r\nINFO {}\r\nPING\r\n", want: "PONG\r\n"},

	{name: "unknown operation", input: "FOO\r\n", want: "-ERR 'Unknown Protocol Operation'\r\n", closes: true},
	{name: "empty line", input: "CONNECT {\"verbose\":false}\r\n\r\nPING\r\n", want: "-ERR 'Unknown Protocol Operation'\r\n", closes: true},
	{name: "UNSUB without arguments", input: "UNSUB\r\n", want: "-ERR 'Unknown Protocol Operation'\r\n", closes: true},
	{name: "MSG from a client", input: "CONNECT {\"verbose\":false}\r\nMSG foo 1 2\r\nhi\r\nPING\r\n", want: "-ERR 'Unknown Protocol Operation'\r\n", closes: true},
	{name: "payload longer than its size", input: "CONNECT {\"verbose\":false}\r\nSUB foo 1\r\nPUB foo 1\r\nxyz\r\n", want: "-ERR 'Unknown Protocol Operation'\r\n", closes: true},
	{name: "PUB without a size", input: "CONNECT {}\r\nPUB foo\r\n", want: "+OK\r\n", closes: true},
	{name: "PUB with a size that is no number", input: "CONNECT {\"verbose\":false}\r\nPUB foo bar\r\n", want: "", closes: true},
	{name: "PUB with a negative size", input: "CONNECT {\"verbose\":false}\r\nPUB foo -1\r\n", want: "", closes: true},
	{name: "SUB without a sid", input: "SUB foo\r\n", want: "", closes: true},
	{name: "SUB with too many arguments", input: "CONNECT {\"verbose\":false}\r\nSUB foo q 1 extra\r\nPING\r\n", want: "", closes: true},
	{name: "CONNECT that is not JSON", input: "CONNECT {bad\r\n", want: "", closes: true},
	{name: "CONNECT with trailing bytes", input: "CONNECT {\"verbose\":false} trailing\r\nPING\r\n", want: "", closes: true},
	{name: "client -ERR", input: "CONNECT {\"verbose\":false}\r\n-ERR 'x'\r\nPING\r\n", want: "", closes: true},
	{name: "HPUB without headers", input: "CONNECT {\"verbose\":false}\r\nHPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", want: "", closes: true},
	{name: "HPUB header longer than message", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB foo 5 2\r\n", want: "", closes: true},
	{name: "unsupported protocol", input: "CONNECT {\"protocol\":2}\r\n", want: "-ERR 'invalid client protocol'\r\n", closes: true},
	{name: "no_responders without headers", input: "CONNECT {\"no_responders\":true}\r\n",
		want: "-ERR 'no responders requires headers support'\r\n", closes: true},
	{name: "oversized payload", input: "CONNECT {}\r\nPUB foo 2000000\r\n", want: "+OK\r\n-ERR 'Maximum Payload Violation'\r\n", closes: true},
	{name: "oversized payload with a lower max_payload", limits: limits{maxPayload: 100},
		input: "CONNECT {\"verbose\":false}\r\nPUB foo 100\r\n" + strings.Repeat("x", 100) + "\r\nHPUB foo 12 101\r\n",
		want:  "", closes: true},
	{name: "oversized control line", input: "CONNECT {}\r\nSUB " + strings.Repeat("a", 5000) + " 1\r\n",
		want: "+OK\r\n-ERR 'maximum control line exceeded'\r\n", closes: true},

	{name: "pedantic subject checks", input: "CONNECT {\"verbose\":true,\"pedantic\":true}\r\nPUB foo.* 1\r\nx\r\nSUB foo..bar 1\r\nSUB a.>.b 2\r\nPUB a..b 0\r\n\r\nPING\r\n",
		want: "+OK\r\n-ERR 'Invalid Publish Subject'\r\n+OK\r\n-ERR 'Invalid Subject'\r\n-ERR 'Invalid Subject'\r\n-ERR 'Invalid Publish Subject'\r\n+OK\r\nPONG\r\n"},
	{name: "wildcard publish subject reaches wildcard subscription", input: "CONNECT {\"verbose\":false,\"pedantic\":true}\r\nSUB foo.> q.* 1\r\nSUB  foo  1\r\nPUB foo.> 0\r\n\r\nPUB > 0\r\n\r\nPUB a.* 0\r\n\r\nPING\r\n",
		want: "-ERR 'Invalid Publish Subject'\r\nMSG foo.> 1 0\r\n\r\n-ERR 'Invalid Publish Subject'\r\n-ERR 'Invalid Publish Subject'\r\nPONG\r\n"},
	{name: "headers, reply subjects and queue subscriptions", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB a.* q 1\r\nSUB a.> 2\r\nHPUB a.b r 18 20\r\nNATS/1.0\r\nX: 1\r\n\r\nhi\r\nPUB a.b.c 0\r\n\r\nPING\r\n",
		// Plain subscriptions get a message before queue subscriptions.
		want: "HMSG a.b 2 r 18 20\r\nNATS/1.0\r\nX: 1\r\n\r\nhi\r\nHMSG a.b 1 r 18 20\r\nNATS/1.0\r\nX: 1\r\n\r\nhi\r\nMSG a.b.c 2 0\r\n\r\nPONG\r\n"},
	{name: "HPUB with an empty header block is a MSG", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB foo 1\r\nHPUB foo 0 2\r\nhi\r\nHPUB foo 4 6\r\nabcdhi\r\nPING\r\n",
		want: "MSG foo 1 2\r\nhi\r\nHMSG foo 1 4 6\r\nabcdhi\r\nPONG\r\n"},
	{name: "no responders", input: "CONNECT {\"headers\":true,\"no_responders\":true,\"verbose\":false}\r\nSUB _INBOX.x 7\r\nPUB svc _INBOX.x 2\r\nhi\r\nHPUB svc _INBOX.x 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n",
		want: "HMSG _INBOX.x 7 35 35\r\nNATS/1.0 503\r\nNats-Subject: svc\r\n\r\n\r\nHMSG _INBOX.x 7 35 35\r\nNATS/1.0 503\r\nNats-Subject: svc\r\n\r\n\r\nPONG\r\n"},
	{name: "echo off", input: "CONNECT {\"echo\":false,\"verbose\":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n", want: "PONG\r\n"},
	{name: "auto-unsubscribe after max messages", input: "CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB a 1\r\nz\r\nPING\r\n",
		want: "MSG a 1 1\r\nx\r\nMSG a 1 1\r\ny\r\nPONG\r\n"},
	{name: "duplicate sid and UNSUB of unknown or already reached", input: "CONNECT {}\r\nSUB a 1\r\nSUB a 1\r\nPUB a 1\r\nx\r\nUNSUB 9\r\nUNSUB 1 0\r\nPUB a 1\r\nx\r\nPING\r\n",
		want: "+OK\r\n+OK\r\n+OK\r\n+OK\r\nMSG a 1 1\r\nx\r\n+OK\r\n+OK\r\n+OK\r\nPONG\r\n"},
	{name: "UNSUB with a max that is no number unsubscribes", input: "CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 x\r\nPUB a 0\r\n\r\nPING\r\n", want: "PONG\r\n"},

	{name: "auth: PING before CONNECT", limits: limits{users: map[string]string{"alice": "secret"}}, input: "PING\r\n",
		want: "-ERR 'Authorization Violation'\r\n", closes: true},
	{name: "auth: wrong password", limits: limits{users: map[string]string{"alice": "secret"}},
		input: "CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"bad\"}\r\nPING\r\n", want: "-ERR 'Authorization Violation'\r\n", closes: true},
	{name: "auth: no credentials", limits: limits{users: map[string]string{"alice": "secret"}},
		input: "CONNECT {\"verbose\":false}\r\nPING\r\n", want: "-ERR 'Authorization Violation'\r\n", closes: true},
	{name: "auth: user and password", limits: limits{users: map[string]string{"alice": "secret"}},
		input: "CONNECT {\"verbose\":true,\"user\":\"alice\",\"pass\":\"secret\"}\r\nPING\r\n", want: "+OK\r\nPONG\r\n"},
	{name: "auth: token", limits: limits{token: "tok"}, input: "CONNECT {\"verbose\":false,\"auth_token\":\"tok\"}\r\nPING\r\n", want: "PONG\r\n"},
	{name: "auth: user and password where a token is wanted", limits: limits{token: "tok"},
		input: "CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"secret\"}\r\nPING\r\n", want: "-ERR 'Authorization Violation'\r\n", closes: true},
	{name: "auth: timeout", limits: limits{token: "tok", authTimeout: 200 * time.Millisecond}, input: "",
		want: "-ERR 'Authentication Timeout'\r\n", closes: true},
}

var infoJSON = regexp.MustCompile(`INFO \{[^\r\n]*\} \r\n`)

// TestProtocolEdgeCases runs every protocolCase against Wharf and
// nats-server: both must answer exactly as listed.
func TestProtocolEdgeCases(t *testing.T) {
	t.Parallel()
	for _, tc := range protocolCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range bothServers(t, tc.limits) {
				got, err := exchange(s.addr, tc)
				if err != nil {
					t.Errorf("%s: %v (read %q)", s.name, err, got)
					continue
				}
				if got != tc.want {
					t.Errorf("%s:\n input %q\n   got %q\n  want %q", s.name, tc.input, got, tc.want)
				}
			}
		})
	}
}

// exchange connects, reads the INFO, writes tc.input and reads the reply.
func exchange(addr string, tc protocolCase) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO {") {
		return line, errors.New("no INFO first")
	}
	if _, err := io.WriteString(c, tc.input); err != nil {
		return "", err
	}
	var got []byte
	buf := make([]byte, 4096)
	pongs := strings.Count(tc.want, "PONG\r\n")
	for tc.closes || bytes.Count(got, []byte("PONG\r\n")) < pongs || (strings.HasSuffix(tc.want, "INFO {...}\r\n") && !bytes.HasSuffix(got, []byte(" \r\n"))) {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if tc.closes && isClosed(err) {
				break
			}
			return string(got), err
		}
	}
	return infoJSON.ReplaceAllString(string(got), "INFO {...}\r\n"), nil
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset")
}

// TestHeadersStrippedForClientsWithout publishes with headers on one
// connection to a subscriber that did not ask for headers: it gets the
// payload alone, as a MSG of the payload's size.
func TestHeadersStrippedForClientsWithout(t *testing.T) {
	t.Parallel()
	for _, s := range bothServers(t, limits{}) {
		sub, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		sub.SetDeadline(time.Now().Add(testTimeout))
		r := bufio.NewReader(sub)
		r.ReadString('\n') // INFO
		io.WriteString(sub, "CONNECT {\"verbose\":false}\r\nSUB h 1\r\nPING\r\n")
		if line, err := r.ReadString('\n'); line != "PONG\r\n" {
			t.Fatalf("%s: subscriber got %q, %v", s.name, line, err)
		}
		tc := protocolCase{input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB h 18 20\r\nNATS/1.0\r\nX: 1\r\n\r\nhi\r\nPING\r\n", want: "PONG\r\n"}
		if _, err := exchange(s.addr, tc); err != nil {
			t.Fatalf("%s: publisher: %v", s.name, err)
		}
		var got []byte
		for !bytes.HasSuffix(got, []byte("hi\r\n")) {
			line, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: subscriber read %q: %v", s.name, got, err)
			}
			got = append(got, line...)
		}
		if string(got) != "MSG h 1 2\r\nhi\r\n" {
			t.Errorf("%s: subscriber got %q, want the payload alone", s.name, got)
		}
	}
}
