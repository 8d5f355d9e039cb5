package users

import (
	"context"
	"net/netip"
	"time"
)

// LoginLimiter slows down repeated failed logins from one address
// (internal/authlimit implements it): Wait before a password is checked,
// then Failed or Succeeded with the outcome.
type LoginLimiter interface {
	Wait(ctx context.Context, remoteIP string) error
	Failed(remoteIP string)
	Succeeded(remoteIP string)
}

// Login checks a plain password from a client at remote (an address as
// net.Addr.String and http.Request.RemoteAddr give it) as Authenticate
// does, for AMQP PLAIN and AMQPLAIN and HTTP basic auth, after waiting
// its turn with limiter (nil: no limit), to which it then reports the
// outcome under remote's IP address. The error is ctx's, when it ends
// during the wait. ctx (an AMQP handshake's deadline; an HTTP
// request's, which ends when its client goes away) ends the catch-up of
// a miss too, and the login is then refused: a node cut off from the
// metadata quorum refuses within the handshake timeout, not after the
// metadata write timeout (30 s).
func (s *Store) Login(ctx context.Context, limiter LoginLimiter, remote, name, password string) (User, bool, error) {
	return s.LoginWithin(ctx, 0, limiter, remote, name, password)
}

// LoginWithin is Login with the catch-up of a miss ended wait after the
// login's turn came too (0: by ctx alone), for a caller whose ctx ends
// only when its client goes away (an HTTP request's): a node cut off
// from the metadata quorum then refuses in bounded time. The limiter's
// wait, bounded by the limiter's own spacing, does not eat into wait.
func (s *Store) LoginWithin(ctx context.Context, wait time.Duration, limiter LoginLimiter, remote, name, password string) (User, bool, error) {
	remoteIP := ""
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		remoteIP = ap.Addr().String()
	}
	if limiter != nil {
		if err := limiter.Wait(ctx, remoteIP); err != nil {
			return User{}, false, err
		}
	}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	u, ok := s.AuthenticateContext(ctx, name, password)
	if limiter != nil {
		if ok {
			limiter.Succeeded(remoteIP)
		} else {
			limiter.Failed(remoteIP)
		}
	}
	return u, ok, nil
}
