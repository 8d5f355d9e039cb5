// Package authlimit slows down repeated failed logins from one address, for
// every protocol that checks passwords (Kafka SASL, AMQP, the management
// API). A front end calls Wait before it checks a login, then Failed or
// Succeeded with the outcome:
//
//	if err := limiter.Wait(ctx, ip); err != nil { ... give up ... }
//	if ok := check(); ok { limiter.Succeeded(ip) } else { limiter.Failed(ip) }
//
// The first few failures from an address cost nothing, so a user who
// mistypes a password is not held up. Past them every attempt from that
// address waits its turn, spaced by a delay that doubles with each further
// failure up to a ceiling: attempts over many parallel connections are
// spaced too, so a password guesser gets a few guesses per ceiling, not
// thousands per second. A success clears the address's record, and so
// does a quiet spell (Config.Forget) without failures. IPv6 addresses are
// counted per /64, the block one client normally holds.
//
// The limiter remembers at most Config.MaxAddresses addresses; past that
// it forgets the quietest, so a flood of addresses cannot exhaust memory.
package authlimit

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Config tunes a Limiter. The zero value of a field means its default.
type Config struct {
	// FreeFailures is how many failures from an address cost nothing
	// (default 3).
	FreeFailures int
	// BaseDelay is the spacing after the first failure past the free
	// ones; each further failure doubles it (default 200ms).
	BaseDelay time.Duration
	// MaxDelay caps the spacing (default 5s): below the request timeouts
	// of Kafka clients (30 s) and AMQP's handshake timeout (10 s), so a
	// legitimate client that shares an address with a guesser still gets
	// through, slowly.
	MaxDelay time.Duration
	// Forget clears an address's failures once it has had none for this
	// long (default 5 minutes).
	Forget time.Duration
	// MaxAddresses bounds the addresses remembered (default 65536).
	MaxAddresses int
}

// Defaults of Config.
const (
	DefaultFreeFailures = 3
	DefaultBaseDelay    = 200 * time.Millisecond
	DefaultMaxDelay     = 5 * time.Second
	DefaultForget       = 5 * time.Minute
	DefaultMaxAddresses = 1 << 16
)

func (c Config) withDefaults() Config {
	if c.FreeFailures <= 0 {
		c.FreeFailures = DefaultFreeFailures
	}
	if c.BaseDelay <= 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	c.MaxDelay = max(c.MaxDelay, c.BaseDelay)
	if c.Forget <= 0 {
		c.Forget = DefaultForget
	}
	if c.MaxAddresses <= 0 {
		c.MaxAddresses = DefaultMaxAddresses
	}
	return c
}

// Limiter counts failed logins per address. A nil *Limiter limits
// nothing. Its methods are safe for concurrent use.
type Limiter struct {
	cfg   Config
	now   func() time.Time // time.Now; tests replace it
	sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	peers map[netip.Prefix]*record
}

// record is one address's recent failures.
type record struct {
	failures    int
	lastFailure time.Time
	// nextTurn is when the next attempt from the address may be
	// checked; each Wait past the free failures moves it on.
	nextTurn time.Time
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	return &Limiter{cfg: cfg.withDefaults(), now: time.Now, sleep: sleepCtx, peers: map[netip.Prefix]*record{}}
}

// Wait returns once a login from remoteIP may be checked: at once unless
// the address has failed more than the free number of times lately. It
// returns ctx's error if ctx ends first.
func (l *Limiter) Wait(ctx context.Context, remoteIP string) error {
	if l == nil {
		return nil
	}
	d := l.reserve(keyOf(remoteIP))
	if d <= 0 {
		return nil
	}
	return l.sleep(ctx, d)
}

// reserve takes the address's next turn and returns how long to wait
// for it.
func (l *Limiter) reserve(key netip.Prefix) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	r := l.current(key, now)
	if r == nil || r.failures < l.cfg.FreeFailures {
		return 0
	}
	turn := later(r.nextTurn, now)
	r.nextTurn = turn.Add(l.delay(r.failures))
	return turn.Sub(now)
}

// delay is the spacing of attempts after failures failures.
func (l *Limiter) delay(failures int) time.Duration {
	d := l.cfg.BaseDelay
	for i := l.cfg.FreeFailures; i < failures && d < l.cfg.MaxDelay; i++ {
		d *= 2
	}
	return min(d, l.cfg.MaxDelay)
}

// Failed records a failed login from remoteIP.
func (l *Limiter) Failed(remoteIP string) {
	if l == nil {
		return
	}
	key := keyOf(remoteIP)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	r := l.current(key, now)
	if r == nil {
		l.makeRoom(now)
		r = &record{}
		l.peers[key] = r
	}
	r.failures++
	r.lastFailure = now
	if r.failures >= l.cfg.FreeFailures {
		// The next attempt waits, even the first one after this.
		r.nextTurn = later(r.nextTurn, now.Add(l.delay(r.failures)))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Succeeded clears remoteIP's failures: a user who got in is no guesser.
func (l *Limiter) Succeeded(remoteIP string) {
	if l == nil {
		return
	}
	key := keyOf(remoteIP)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.peers, key)
}

// current returns key's record, or nil when it has none or it has been
// quiet long enough to be forgotten.
func (l *Limiter) current(key netip.Prefix, now time.Time) *record {
	r := l.peers[key]
	if r != nil && l.forgotten(r, now) {
		delete(l.peers, key)
		return nil
	}
	return r
}

func (l *Limiter) forgotten(r *record, now time.Time) bool {
	return now.Sub(r.lastFailure) >= l.cfg.Forget && !r.nextTurn.After(now)
}

// makeRoom drops forgotten records once the map is full, and then the
// record with the oldest failure if it is still full.
func (l *Limiter) makeRoom(now time.Time) {
	if len(l.peers) < l.cfg.MaxAddresses {
		return
	}
	var oldestKey netip.Prefix
	var oldest *record
	for k, r := range l.peers {
		if l.forgotten(r, now) {
			delete(l.peers, k)
			continue
		}
		if oldest == nil || r.lastFailure.Before(oldest.lastFailure) {
			oldestKey, oldest = k, r
		}
	}
	if len(l.peers) >= l.cfg.MaxAddresses && oldest != nil {
		delete(l.peers, oldestKey)
	}
}

// keyOf groups an address with its neighbours that one client controls:
// the IPv4 address itself, or its IPv6 /64. Something that is not an IP
// address (a pipe in a test) is one group of its own.
func keyOf(remoteIP string) netip.Prefix {
	addr, err := netip.ParseAddr(remoteIP)
	if err != nil {
		return netip.Prefix{}
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}
	p, _ := addr.Prefix(64)
	return p
}

// RemoteIP is the IP address of a connection's peer, as Wait and the
// others take it ("" for an address without one).
func RemoteIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().String()
	}
	return ""
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
