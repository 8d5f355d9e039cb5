package raft

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Join requests: how a node that is no member yet asks a running
// cluster to take it in (`wharf serve --join HOST:PORT`). It knows one
// member's cluster address and nothing else, not even that member's id,
// so it cannot speak Raft to it yet: it dials the address with
// joinMagic instead of a hello, sends one request and reads one reply
// on that connection, which then closes. What the request and reply
// hold is the JoinHandler's business (internal/node).
//
// Request: joinMagic, then the request as a uvarint length and bytes.
// Reply: one status byte (0: accepted, 1: refused), then the answer (or
// the refusal's text) as a uvarint length and bytes.

// joinMagic starts a join request: "wharf join, version 1".
var joinMagic = [6]byte{'W', 'J', 'O', 'I', 'N', 1}

// maxJoinBytes bounds a join request or reply.
const maxJoinBytes = 1 << 20

// joinTimeout bounds how long a member serves one join request.
const joinTimeout = 60 * time.Second

// JoinHandler answers a join request on a member: the reply, or why the
// request is refused (sent to the joining node as text).
type JoinHandler func(ctx context.Context, request []byte) ([]byte, error)

// ErrJoinRefused is a join request the member refused; the error says
// why.
var ErrJoinRefused = errors.New("raft: join refused")

// SetJoinHandler installs what answers join requests; until then they
// are refused.
func (t *TCPTransport) SetJoinHandler(h JoinHandler) { t.join.Store(&h) }

// serveJoin serves c as a join request if it starts with joinMagic, and
// reports whether it did (c is then closed).
func (t *TCPTransport) serveJoin(c net.Conn, r *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	magic, err := r.Peek(len(joinMagic))
	if err != nil || [len(joinMagic)]byte(magic) != joinMagic {
		return false
	}
	defer c.Close()
	r.Discard(len(joinMagic))
	req, err := readJoinBytes(r)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		t.logger.Warn("a join request could not be read", "remote", c.RemoteAddr(), "err", err)
		return true
	}
	status, answer := byte(0), []byte(nil)
	if h := t.join.Load(); h == nil {
		status, answer = 1, []byte("this node takes no join requests yet")
	} else {
		ctx, cancel := context.WithTimeout(t.ctx, joinTimeout)
		answer, err = (*h)(ctx, req)
		cancel()
		if err != nil {
			status, answer = 1, []byte(err.Error())
		}
	}
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.Write(binary.AppendUvarint([]byte{status}, uint64(len(answer))))
	c.Write(answer)
	return true
}

// RequestJoin sends a join request to the member at addr and returns
// its reply; a refusal is an ErrJoinRefused with the member's reason.
func RequestJoin(ctx context.Context, addr string, request []byte) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	msg := binary.AppendUvarint(joinMagic[:], uint64(len(request)))
	if _, err := c.Write(append(msg, request...)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	status, err := r.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("raft: reading the join reply: %w", err)
	}
	answer, err := readJoinBytes(r)
	if err != nil {
		return nil, fmt.Errorf("raft: reading the join reply: %w", err)
	}
	if status != 0 {
		return nil, fmt.Errorf("%w: %s", ErrJoinRefused, answer)
	}
	return answer, nil
}

func readJoinBytes(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > maxJoinBytes {
		return nil, fmt.Errorf("raft: a join message of %d bytes", n)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}
