package raft

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The TCP transport: one connection per pair of nodes, which the node
// with the lower id dials and both send on. Each side has a bounded queue
// per peer; a writer goroutine per peer sends everything queued as one
// frame (frame.go: a batch of envelopes for many groups, checksummed) and a
// reader per connection hands what arrives to the host. A full queue drops
// what Send adds (Raft sends it again); Stream waits for room instead. A
// broken connection is dropped and dialed again with backoff (10 ms
// doubling to 1 s); what was queued meanwhile waits for the next one.
//
// A connection opens with the dialer's hello: helloMagic, then its node
// id as a uvarint. The host hears of every connection that opens
// (Handler.Connected) and breaks (Handler.Disconnected): its requests
// waiting on an answer over one that broke fail or are sent again at
// once, and while it has none to a peer, requests to it fail at once
// (forward.go).

// helloMagic starts every connection: "wharf raft", then the version of
// the frames that follow. Version 2: a ping carries its host's
// incarnation (quiesce.go). Version 3: Raft messages in the transport's
// own encoding, record batches under their own CRCs (frame.go). Version 4:
// a forward's request id is unique across its sender's runs, and the
// leader takes a forward sent again under the same id once (forward.go).
// Version 5: a forward or a call carries the time it has left, and one
// that arrives expired is refused (forward.go). A peer of another version
// is refused at the hello, with a message that says so, rather than
// misreading its frames.
var helloMagic = [6]byte{'W', 'R', 'A', 'F', 'T', 5}

// TCPConfig configures a TCP transport.
type TCPConfig struct {
	// NodeID is this node's id.
	NodeID uint64
	// ListenAddr is the address to listen on for peers (--cluster-addr;
	// "127.0.0.1:0" picks a port).
	ListenAddr string
	// Peers maps the other nodes' ids to their addresses (SetPeer adds
	// more).
	Peers map[uint64]string
	// QueueBytes bounds what may wait for one peer (64 MiB).
	QueueBytes int
	// Logger (nil: slog.Default).
	Logger *slog.Logger
}

// readBufferBytes is the size of a connection's read buffer.
const readBufferBytes = 64 << 10

// maxBatchBytes is about the most one frame carries; more waits for the
// next.
const maxBatchBytes = 4 << 20

// userTimeout bounds how long what was written to a connection may stay
// unacknowledged (TCP_USER_TIMEOUT, on Linux) before the connection
// breaks, and what it held is dropped with it: across a network cut the
// kernel would otherwise retransmit it for up to about 15 minutes, and
// deliver it, forwards and calls that late, once the cut heals. It is
// part of how late a copy of a request may be read (forward.go), with
// the write deadline (as long), which bounds the wait for room in the
// socket's buffer.
const userTimeout = 10 * time.Second

// TCPTransport is a Transport over TCP.
type TCPTransport struct {
	cfg      TCPConfig
	logger   *slog.Logger
	listener net.Listener
	handler  Handler
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	peers   map[uint64]*tcpPeer
	conns   map[net.Conn]bool
	started bool

	dropped atomic.Int64 // envelopes dropped on full queues, or expired in them

	join atomic.Pointer[JoinHandler] // answers join requests (join.go)
}

// tcpPeer is one peer: its queue and its connection.
type tcpPeer struct {
	id   uint64
	t    *TCPTransport
	mu   sync.Mutex
	cond *sync.Cond // on mu: the queue or the connection changed
	addr string     // where to dial it; "" if it dials us
	// queue holds what waits to be sent, queued its size.
	queue   []Envelope
	queued  int
	conn    net.Conn
	running bool // its goroutines run; guarded by t.mu
}

// ListenTCP binds the transport's listener; Start begins serving.
func ListenTCP(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("raft: node id 0")
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{cfg: cfg, logger: cfg.Logger.With("node", cfg.NodeID), listener: ln, ctx: ctx, cancel: cancel,
		peers: map[uint64]*tcpPeer{}, conns: map[net.Conn]bool{}}
	for id, addr := range cfg.Peers {
		t.peer(id).addr = addr
	}
	return t, nil
}

// Addr is the address the transport listens on.
func (t *TCPTransport) Addr() net.Addr { return t.listener.Addr() }

// Dropped is how many envelopes the queues dropped: full, or expired in
// them (forwards and calls).
func (t *TCPTransport) Dropped() int64 { return t.dropped.Load() }

// Start accepts peers' connections and dials the peers with higher ids,
// handing what arrives to h.
func (t *TCPTransport) Start(h Handler) {
	t.mu.Lock()
	t.handler, t.started = h, true
	peers := make([]*tcpPeer, 0, len(t.peers))
	for _, p := range t.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	t.wg.Add(1)
	go t.accept()
	for _, p := range peers {
		t.ensureRunning(p)
	}
}

// SetPeer sets (or changes) where node id listens.
func (t *TCPTransport) SetPeer(id uint64, addr string) {
	p := t.peer(id)
	p.mu.Lock()
	changed := p.addr != addr
	p.addr = addr
	if changed && p.conn != nil && t.cfg.NodeID < id {
		p.conn.Close() // dial the new address
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	t.ensureRunning(p)
}

// peer returns peer id, creating it (not yet running) if it is new.
func (t *TCPTransport) peer(id uint64) *tcpPeer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		return p
	}
	return t.newPeer(id)
}

// newPeer adds peer id. Caller holds mu.
func (t *TCPTransport) newPeer(id uint64) *tcpPeer {
	p := &tcpPeer{id: id, t: t}
	p.cond = sync.NewCond(&p.mu)
	t.peers[id] = p
	return p
}

// ensureRunning starts a peer's writer, and its dialer if this node
// dials it, once the transport is started.
func (t *TCPTransport) ensureRunning(p *tcpPeer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started || p.running || t.ctx.Err() != nil {
		return
	}
	p.running = true
	t.wg.Add(1)
	go p.write()
	if t.cfg.NodeID < p.id {
		t.wg.Add(1)
		go p.dial()
	}
}

// Send queues envs for node to, dropping what does not fit.
func (t *TCPTransport) Send(to uint64, envs []Envelope) {
	p := t.known(to)
	if p == nil {
		t.dropped.Add(int64(len(envs)))
		return
	}
	p.mu.Lock()
	for _, e := range envs {
		if size := e.size(); p.queued+size <= t.cfg.QueueBytes {
			p.queue = append(p.queue, e)
			p.queued += size
		} else {
			t.dropped.Add(1)
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Stream queues envs for node to, waiting for room in the queue (and for a
// connection) until ctx ends.
func (t *TCPTransport) Stream(ctx context.Context, to uint64, envs []Envelope) error {
	p := t.known(to)
	if p == nil {
		return fmt.Errorf("raft: no peer %d", to)
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range envs {
		size := e.size()
		for p.queued > 0 && p.queued+size > t.cfg.QueueBytes || p.conn == nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			if t.ctx.Err() != nil {
				return net.ErrClosed
			}
			p.cond.Wait()
		}
		p.queue = append(p.queue, e)
		p.queued += size
		p.cond.Broadcast()
	}
	return nil
}

// known returns peer id if the transport has heard of it.
func (t *TCPTransport) known(id uint64) *tcpPeer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[id]
}

// Close stops the transport: the listener, every connection and goroutine.
func (t *TCPTransport) Close() error {
	t.cancel()
	err := t.listener.Close()
	t.mu.Lock()
	for c := range t.conns {
		c.Close()
	}
	peers := make([]*tcpPeer, 0, len(t.peers))
	for _, p := range t.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	for _, p := range peers {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	t.wg.Wait()
	return err
}

// accept takes the connections peers dial.
func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.listener.Accept()
		if err != nil {
			if t.ctx.Err() == nil {
				t.logger.Warn("raft transport stopped accepting", "err", err)
			}
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			// One buffered reader for the hello and the frames after it: the
			// dialer may send its first frame right behind the hello, and
			// a reader of its own for the hello would swallow its start.
			r := bufio.NewReaderSize(c, readBufferBytes)
			if t.serveJoin(c, r) {
				return
			}
			id, err := readHello(c, r)
			if err != nil || id == t.cfg.NodeID {
				t.logger.Warn("refusing a cluster connection", "remote", c.RemoteAddr(), "id", id, "err", err)
				c.Close()
				return
			}
			if err := setUserTimeout(c); err != nil {
				t.logger.Warn("a cluster connection may deliver late what it held when cut off", "peer", id, "err", err)
			}
			p := t.peer(id)
			t.ensureRunning(p)
			t.serve(p, c, r, nil)
		}()
	}
}

// dial keeps a connection to a peer this node dials, with backoff.
func (p *tcpPeer) dial() {
	t := p.t
	defer t.wg.Done()
	backoff := 10 * time.Millisecond
	for t.ctx.Err() == nil {
		p.mu.Lock()
		for (p.conn != nil || p.addr == "") && t.ctx.Err() == nil {
			p.cond.Wait()
		}
		addr := p.addr
		p.mu.Unlock()
		if t.ctx.Err() != nil {
			return
		}
		c, err := dialPeer(t.ctx, addr, t.cfg.NodeID)
		if err != nil {
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		installed := make(chan struct{})
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.serve(p, c, bufio.NewReaderSize(c, readBufferBytes), installed)
		}()
		// Wait for serve to install it before dialing again; the loop's
		// first wait then holds until it breaks. (Waiting for p.conn to
		// be c instead missed a connection that broke as soon as it was
		// installed: p.conn was nil again, and this peer was never
		// dialed again.)
		select {
		case <-installed:
		case <-t.ctx.Done():
		}
	}
}

func dialPeer(ctx context.Context, addr string, self uint64) (net.Conn, error) {
	if addr == "" {
		return nil, errors.New("raft: no address")
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := setUserTimeout(c); err != nil {
		c.Close()
		return nil, err
	}
	hello := binary.AppendUvarint(helloMagic[:], self)
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// readHello reads the dialer's hello from r, c's reader.
func readHello(c net.Conn, r *bufio.Reader) (uint64, error) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var magic [len(helloMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return 0, err
	}
	switch {
	case [5]byte(magic[:5]) != [5]byte(helloMagic[:5]):
		return 0, errors.New("not a raft peer")
	case magic != helloMagic:
		return 0, fmt.Errorf("a raft peer of wire version %d, where this node speaks version %d: every node of a cluster must run the same release", magic[5], helloMagic[5])
	}
	return binary.ReadUvarint(r)
}

// serve makes c p's connection and reads from it, through r, until it
// breaks. It closes installed (if not nil) once c is p's connection, or
// once it gives c up.
func (t *TCPTransport) serve(p *tcpPeer, c net.Conn, r *bufio.Reader, installed chan<- struct{}) {
	done := func() {
		if installed != nil {
			close(installed)
		}
	}
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		c.Close()
		done()
		return
	}
	t.conns[c] = true
	t.mu.Unlock()
	p.mu.Lock()
	if p.conn != nil {
		p.conn.Close() // the peer dialed again: its old connection is dead to it
	}
	p.conn = c
	p.cond.Broadcast()
	p.mu.Unlock()
	done()
	t.handler.Connected(p.id)

	err := t.read(p, r)
	if t.ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		t.logger.Debug("cluster connection broke", "peer", p.id, "err", err)
	}
	p.drop(c)
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	if t.ctx.Err() == nil {
		// Also for a connection the peer replaced (the host counts them):
		// it dials again only once it lost the old one, and what went on
		// that is lost too. After every frame read from c (read delivered
		// them in order).
		t.handler.Disconnected(p.id)
	}
}

// read hands every frame read from r to the host.
func (t *TCPTransport) read(p *tcpPeer, r *bufio.Reader) error {
	var buf []byte
	var warned time.Time
	for {
		envs, b, err := readFrame(r, buf)
		if errors.Is(err, errBadBatch) {
			// A batch damaged in its leader's log comes again with every
			// resend: a warning every minute is enough.
			if time.Since(warned) > time.Minute {
				t.logger.Warn("left out Raft messages carrying a damaged record batch", "peer", p.id, "err", err)
				warned = time.Now()
			}
			err = nil
		}
		if err != nil {
			return err
		}
		buf = b
		t.handler.Deliver(p.id, envs)
	}
}

// drop forgets c, if it is still p's connection, and closes it.
func (p *tcpPeer) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

// write sends what is queued, a frame at a time, while there is a
// connection.
func (p *tcpPeer) write() {
	t := p.t
	defer t.wg.Done()
	var enc frameEncoder
	for {
		p.mu.Lock()
		for (len(p.queue) == 0 || p.conn == nil) && t.ctx.Err() == nil {
			p.cond.Wait()
		}
		if t.ctx.Err() != nil {
			p.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(p.queue) && (n == 0 || size < maxBatchBytes) {
			size += p.queue[n].size()
			n++
		}
		batch := p.queue[:n:n]
		p.queue = p.queue[n:]
		p.queued -= size
		c := p.conn
		p.cond.Broadcast() // room for Stream
		p.mu.Unlock()

		now := time.Now()
		batch = dropExpired(batch, now, &t.dropped)
		if len(batch) == 0 {
			continue
		}
		frame, err := enc.encode(batch, now)
		if err != nil {
			t.logger.Error("encoding a raft frame failed; dropping it", "peer", p.id, "err", err)
			continue
		}
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := frame.WriteTo(c); err != nil {
			// Reset, not closed: a close would leave what the socket
			// still holds for the kernel to deliver, however late
			// (forward.go).
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			p.drop(c) // the batch is lost with it, as Raft tolerates
		}
	}
}

// dropExpired leaves out of batch the forwards and calls that expired by
// now, waiting in the queue (while there was no connection): their
// callers gave up, and their receiver may have forgotten an earlier copy
// it took. It counts them in dropped.
func dropExpired(batch []Envelope, now time.Time, dropped *atomic.Int64) []Envelope {
	kept := batch[:0]
	for _, e := range batch {
		if (e.Kind == KindForward || e.Kind == KindCall) && expired(&e, now) {
			dropped.Add(1)
			continue
		}
		kept = append(kept, e)
	}
	return kept
}
