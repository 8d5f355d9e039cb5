package users

import (
	"context"
	"errors"
)

// Bootstrap gives a node its first users. On a store that has never held a
// user it creates guest/guest, tagged administrator, as RabbitMQ does on a
// new node (the front ends allow guest from loopback addresses only), and
// records that it did: a store whose users were all deleted later stays
// without guest. When admin is set it also makes sure that user exists,
// tagged administrator: created with password if missing, left alone if
// present, so a password changed later through the CLI or the API is not
// reset by every restart.
func Bootstrap(s *Store, admin, password string) error {
	if !s.wasInitialised() {
		// A store of an older version holds users but no record; it was
		// given its first users then.
		if s.Empty() {
			if err := s.Put("guest", "guest", []string{TagAdministrator}); err != nil {
				return err
			}
		}
		if err := s.kv.Put(initialisedKey, []byte("{}")); err != nil {
			return err
		}
	}
	if admin == "" {
		return nil
	}
	if password == "" {
		return errors.New("users: an administrator needs a password (--admin-password, WHARF_ADMIN_PASSWORD)")
	}
	if _, ok := s.Get(admin); ok {
		return nil
	}
	return s.Put(admin, password, []string{TagAdministrator})
}

// wasInitialised reports whether the store was given its first users, on
// any node of the cluster (it waits for the cluster, as Empty does, when
// this node has not seen the record).
func (s *Store) wasInitialised() bool {
	if !s.initialised.Load() {
		s.kv.BarrierContext(context.Background()) // without a quorum the answer stands
	}
	return s.initialised.Load()
}
