package nats

import "crypto/subtle"

// authenticate reports whether a CONNECT's credentials are accepted: the
// token when one is configured, otherwise a known user with its password.
func (s *Server) authenticate(o *connectOptions) bool {
	switch {
	case !s.cfg.authRequired():
		return true
	case s.cfg.Token != "":
		return equalSecret(o.Token, s.cfg.Token)
	}
	password, ok := s.cfg.Users[o.User]
	return ok && equalSecret(o.Pass, password)
}

func equalSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
