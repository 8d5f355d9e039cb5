package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/wharf-mq/wharf/internal/users"
)

// Users as RabbitMQ's API shows and takes them. Wharf keeps SCRAM
// credentials, not RabbitMQ's salted SHA-256, so password_hash is
// users.PasswordHash's text with hashing_algorithm "wharf_scram": enough
// to move a user between Wharf nodes, never the password.

// userJSON is a user as GET /api/users shows it.
func userJSON(u users.User) map[string]any {
	return map[string]any{
		"name": u.Name, "password_hash": u.PasswordHash(), "hashing_algorithm": users.HashingAlgorithm,
		"tags": tagsJSON(u), "limits": map[string]any{},
	}
}

func tagsJSON(u users.User) []string {
	if u.Tags == nil {
		return []string{}
	}
	return u.Tags
}

// whoami is GET /api/whoami: the requesting user and its tags.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	u := requester(r)
	writeJSON(w, http.StatusOK, map[string]any{"name": u.Name, "tags": tagsJSON(u)})
}

// listUsers is GET /api/users.
func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	var out []map[string]any
	for _, u := range s.cfg.Users.List() {
		out = append(out, userJSON(u))
	}
	writeList(w, r, out)
}

// getUser is GET /api/users/{user}.
func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.lookupContext(r)
	defer cancel()
	u, ok := s.cfg.Users.GetContext(ctx, r.PathValue("user"))
	if !ok {
		writeNotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, userJSON(u))
}

// userBody is the body of PUT /api/users/{user}.
type userBody struct {
	Password         *string  `json:"password"`
	PasswordHash     *string  `json:"password_hash"`
	HashingAlgorithm string   `json:"hashing_algorithm"`
	Tags             *tagList `json:"tags"`
}

// tagList is a user's tags as RabbitMQ takes them: a list, or one string
// of comma-separated tags ("" for none).
type tagList []string

func (t *tagList) UnmarshalJSON(data []byte) error {
	var list []string
	if err := json.Unmarshal(data, &list); err == nil {
		*t = list
		return nil
	}
	var joined string
	if err := json.Unmarshal(data, &joined); err != nil {
		return &fieldError{"not_a_tag_list", string(data)}
	}
	*t = strings.Split(joined, ",")
	return nil
}

// putUser is PUT /api/users/{user}, as RabbitMQ's put_user: with
// password, or password_hash, or neither (a user that logs in only with a
// TLS client certificate; an existing user loses its password); tags
// are required. 201 for a new user, 204 for a changed one.
func (s *Server) putUser(w http.ResponseWriter, r *http.Request) {
	var body userBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	if body.Tags == nil {
		writeBadRequest(w, "tags_not_present")
		return
	}
	name := r.PathValue("user")
	_, existed := s.cfg.Users.Get(name)
	var err error
	switch {
	case body.Password != nil && body.PasswordHash != nil:
		writeBadRequest(w, "both_password_and_password_hash_are_provided")
		return
	case body.Password != nil:
		err = s.cfg.Users.Put(name, *body.Password, *body.Tags)
	case body.PasswordHash != nil:
		var creds map[users.Mechanism]users.Credential
		if creds, err = parsePasswordHash(*body.PasswordHash, body.HashingAlgorithm); err == nil {
			err = s.cfg.Users.PutCredentials(name, creds, *body.Tags)
		}
	default:
		err = s.cfg.Users.PutCredentials(name, nil, *body.Tags)
	}
	if err != nil {
		writeUserError(w, err)
		return
	}
	writeCreated(w, existed)
}

// parsePasswordHash reads a password_hash of the given algorithm ("":
// Wharf's).
func parsePasswordHash(hash, algorithm string) (map[users.Mechanism]users.Credential, error) {
	if algorithm != "" && algorithm != users.HashingAlgorithm {
		return nil, fmt.Errorf("%w: hashing_algorithm %s cannot be used: Wharf keeps SCRAM credentials (%s); set a password instead",
			users.ErrPasswordHash, algorithm, users.HashingAlgorithm)
	}
	return users.ParsePasswordHash(hash)
}

// writeUserError answers a user store error: 400 for what the request
// got wrong, 500 for a store failure.
func writeUserError(w http.ResponseWriter, err error) {
	for _, bad := range []error{users.ErrInvalidName, users.ErrNoPassword, users.ErrPasswordHash} {
		if errors.Is(err, bad) {
			writeBadRequest(w, err.Error())
			return
		}
	}
	writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
}

// deleteUser is DELETE /api/users/{user}: the user goes with its
// permissions, and its connections are closed, as in RabbitMQ.
func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("user")
	if err := s.cfg.Users.Delete(name); err != nil {
		if errors.Is(err, users.ErrNoSuchUser) {
			writeNotFound(w)
			return
		}
		writeUserError(w, err)
		return
	}
	if err := s.cfg.Access.ForgetUser(name); err != nil {
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	s.amqp.CloseUserConnections(name, fmt.Sprintf("user '%s' is deleted", name))
	w.WriteHeader(http.StatusNoContent)
}
