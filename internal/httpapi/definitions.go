package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// Definitions, RabbitMQ's export format: every user (with its
// password_hash, see users.go), vhost, permission, topic permission,
// policy, queue (but exclusive ones, which belong to a connection),
// exchange (but the predeclared ones) and binding (but the default
// exchange's implicit ones). A vhost's definitions hold its objects
// only, as RabbitMQ's do. Runtime parameters are not Wharf's: exported
// empty and ignored on import, with a warning in the log.

// isPredeclared reports whether every vhost has the exchange from the
// start: the default exchange and the amq.* ones (only the broker may
// declare names starting with "amq.").
func isPredeclared(name string) bool { return name == "" || strings.HasPrefix(name, "amq.") }

// vhostDefinitions collects one vhost's definitions; withVHost adds the
// "vhost" field each object carries in a whole-node export.
func vhostDefinitions(v *mq.VHost, withVHost bool, into map[string][]map[string]any) {
	add := func(kind string, obj map[string]any) {
		if withVHost {
			obj["vhost"] = v.Name()
		} else {
			delete(obj, "vhost")
		}
		into[kind] = append(into[kind], obj)
	}
	for _, p := range v.Policies() {
		add("policies", policyJSON(p))
	}
	exclusive := map[string]bool{}
	for _, q := range v.QueueDetails() {
		if q.Exclusive {
			exclusive[q.Name] = true
			continue
		}
		add("queues", map[string]any{"name": q.Name, "durable": q.Durable, "auto_delete": q.AutoDelete, "arguments": jsonTable(q.Args)})
	}
	for _, x := range v.Exchanges() {
		if !isPredeclared(x.Name) {
			add("exchanges", map[string]any{"name": x.Name, "type": x.Type, "durable": x.Durable,
				"auto_delete": x.AutoDelete, "internal": x.Internal, "arguments": jsonTable(x.Args)})
		}
	}
	for _, b := range v.Bindings() {
		if b.ToExchange || !exclusive[b.Destination] {
			kind, _ := destinationKind(b)
			add("bindings", map[string]any{"source": b.Source, "destination": b.Destination, "destination_type": kind,
				"routing_key": b.Key, "arguments": jsonTable(b.Args)})
		}
	}
}

// exportDefinitions is GET /api/definitions[/{vhost}].
func (s *Server) exportDefinitions(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	lists := map[string][]map[string]any{}
	whole := r.PathValue("vhost") == ""
	for _, v := range vs {
		vhostDefinitions(v, whole, lists)
	}
	out := map[string]any{"rabbit_version": s.cfg.Version, "parameters": []any{}}
	for _, kind := range []string{"policies", "queues", "exchanges", "bindings"} {
		out[kind] = append([]map[string]any{}, lists[kind]...) // [] rather than null
	}
	if whole {
		vhosts := []map[string]any{}
		for _, v := range vs {
			vhosts = append(vhosts, map[string]any{"name": v.Name()})
		}
		out["vhosts"], out["rabbitmq_version"] = vhosts, s.cfg.Version
		out["product_name"], out["product_version"] = "Wharf", s.cfg.Version
		out["global_parameters"] = []any{}
		userList, permissions, topicPermissions := []map[string]any{}, []map[string]any{}, []map[string]any{}
		for _, u := range s.cfg.Users.List() {
			userList = append(userList, userJSON(u))
		}
		for _, p := range s.cfg.Access.Permissions() {
			permissions = append(permissions, permissionJSON(p))
		}
		for _, p := range s.cfg.Access.TopicPermissions() {
			topicPermissions = append(topicPermissions, topicPermissionJSON(p))
		}
		out["users"], out["permissions"], out["topic_permissions"] = userList, permissions, topicPermissions
	}
	writeJSON(w, http.StatusOK, out)
}

// definitions is an import: RabbitMQ's format, Wharf's or RabbitMQ's
// export.
type definitions struct {
	VHosts []struct {
		Name string `json:"name"`
	} `json:"vhosts"`
	Policies []struct {
		VHost      string         `json:"vhost"`
		Name       string         `json:"name"`
		Pattern    string         `json:"pattern"`
		ApplyTo    string         `json:"apply-to"`
		Definition map[string]any `json:"definition"`
		Priority   flexInt        `json:"priority"`
	} `json:"policies"`
	Queues []struct {
		VHost      string         `json:"vhost"`
		Name       string         `json:"name"`
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
	} `json:"queues"`
	Exchanges []struct {
		VHost      string         `json:"vhost"`
		Name       string         `json:"name"`
		Type       string         `json:"type"`
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Internal   flexBool       `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	} `json:"exchanges"`
	Bindings []struct {
		VHost           string         `json:"vhost"`
		Source          string         `json:"source"`
		Destination     string         `json:"destination"`
		DestinationType string         `json:"destination_type"`
		RoutingKey      string         `json:"routing_key"`
		Arguments       map[string]any `json:"arguments"`
	} `json:"bindings"`

	Users []struct {
		Name             string  `json:"name"`
		PasswordHash     string  `json:"password_hash"`
		HashingAlgorithm string  `json:"hashing_algorithm"`
		Tags             tagList `json:"tags"`
	} `json:"users"`
	Permissions      []access.Permission      `json:"permissions"`
	TopicPermissions []access.TopicPermission `json:"topic_permissions"`

	// Not imported (see above); counted for the warning.
	Parameters       []json.RawMessage `json:"parameters"`
	GlobalParameters []json.RawMessage `json:"global_parameters"`
}

// importDefinitions is POST /api/definitions[/{vhost}]: it creates what
// the definitions name, in RabbitMQ's order (users, vhosts, permissions,
// policies, queues, exchanges, bindings), and answers 204. As in RabbitMQ a queue or
// exchange that exists already is left as it is, and a binding whose
// source or destination is missing is skipped (both logged); an object in
// a vhost that does not exist is 400 before anything changes. Into
// {vhost}, the objects' own vhost fields are ignored.
func (s *Server) importDefinitions(w http.ResponseWriter, r *http.Request) {
	into := r.PathValue("vhost")
	if into != "" {
		if _, ok := s.writeVHostOf(w, r); !ok {
			return
		}
	}
	var defs definitions
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxDefinitionsBytes))
	dec.UseNumber()
	if err := dec.Decode(&defs); err != nil {
		writeBadRequest(w, "failed_to_parse_json")
		return
	}
	imp := &importer{s: s, r: r, into: into, vhosts: map[string]*mq.VHost{}}
	if into == "" {
		for _, v := range defs.VHosts {
			imp.planned(v.Name)
		}
		for _, p := range defs.Permissions {
			imp.need(p.VHost)
		}
		for _, p := range defs.TopicPermissions {
			imp.need(p.VHost)
		}
	}
	for _, p := range defs.Policies {
		imp.need(p.VHost)
	}
	for _, q := range defs.Queues {
		imp.need(q.VHost)
	}
	for _, x := range defs.Exchanges {
		imp.need(x.VHost)
	}
	for _, b := range defs.Bindings {
		imp.need(b.VHost)
	}
	if imp.missing != "" {
		writeBadRequest(w, "no_such_vhost "+imp.missing)
		return
	}
	if err := imp.run(&defs); err != nil {
		if errors.Is(err, access.ErrInvalidRegexp) || errors.Is(err, access.ErrNoExchange) {
			writeAccessError(w, err)
		} else {
			writeMQError(w, err)
		}
		return
	}
	ignored := len(defs.Parameters) + len(defs.GlobalParameters)
	if into != "" {
		ignored += len(defs.Users) + len(defs.Permissions) + len(defs.TopicPermissions)
	}
	if ignored > 0 {
		s.cfg.Logger.Warn("definitions import: parameters, and users and permissions into one vhost, are not imported", "ignored", ignored)
	}
	w.WriteHeader(http.StatusNoContent)
}

// importer applies one import.
type importer struct {
	s       *Server
	r       *http.Request        // the import's: its lookups catch up once (lookedUp)
	into    string               // the vhost of the path, "" for a whole-node import
	vhosts  map[string]*mq.VHost // by name; nil value: to be created
	missing string               // a vhost named that neither exists nor is created
}

// vhostName is the vhost an object of the import goes to.
func (imp *importer) vhostName(name string) string {
	if imp.into != "" {
		return imp.into
	}
	return name
}

// planned records a vhost the import creates.
func (imp *importer) planned(name string) {
	if _, seen := imp.vhosts[name]; !seen {
		imp.vhosts[name] = nil
	}
}

// need records the vhost of an object, noting it if it is missing.
func (imp *importer) need(name string) {
	name = imp.vhostName(name)
	if _, seen := imp.vhosts[name]; seen {
		return
	}
	v, found := imp.s.vhostNamed(imp.r, name)
	if !found && imp.missing == "" {
		imp.missing = name
	}
	imp.vhosts[name] = v
}

func (imp *importer) vhost(name string) *mq.VHost { return imp.vhosts[imp.vhostName(name)] }

func (imp *importer) run(defs *definitions) error {
	log := imp.s.cfg.Logger
	if imp.into == "" {
		imp.users(defs)
	}
	for name, v := range imp.vhosts {
		if v == nil {
			created, err := imp.s.reg.AddVHost(name)
			if err != nil {
				return err
			}
			imp.vhosts[name] = created
		}
	}
	if imp.into == "" {
		if err := imp.permissions(defs); err != nil {
			return err
		}
	}
	for _, p := range defs.Policies {
		err := imp.vhost(p.VHost).SetPolicy(mq.Policy{Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Priority: int(p.Priority.V), Definition: p.Definition})
		if err != nil {
			return err
		}
	}
	for _, q := range defs.Queues {
		v := imp.vhost(q.VHost)
		if _, err := v.QueueDetail(q.Name); err == nil {
			log.Info("definitions import: queue exists, left as it is", "vhost", v.Name(), "queue", q.Name)
			continue
		}
		def := mq.QueueDef{Name: q.Name, Durable: q.Durable.V, AutoDelete: q.AutoDelete.V, Args: tableOf(q.Arguments)}
		if _, err := v.DeclareQueue(def, false); err != nil {
			return err
		}
	}
	for _, x := range defs.Exchanges {
		v := imp.vhost(x.VHost)
		if _, found := lookupExchange(v, x.Name); found {
			log.Info("definitions import: exchange exists, left as it is", "vhost", v.Name(), "exchange", x.Name)
			continue
		}
		def := mq.ExchangeDef{Name: x.Name, Type: x.Type, Durable: x.Durable.V, AutoDelete: x.AutoDelete.V,
			Internal: x.Internal.V, Args: tableOf(x.Arguments)}
		if err := v.DeclareExchange(def, false); err != nil {
			return err
		}
	}
	for _, b := range defs.Bindings {
		v := imp.vhost(b.VHost)
		var err error
		if b.DestinationType == "exchange" {
			err = v.BindExchange(b.Destination, b.Source, b.RoutingKey, tableOf(b.Arguments))
		} else {
			err = v.BindQueue(b.Destination, b.Source, b.RoutingKey, tableOf(b.Arguments), 0)
		}
		var we *amqpwire.Error
		if errors.As(err, &we) && we.Code == amqpwire.CodeNotFound {
			log.Warn("definitions import: binding skipped", "vhost", v.Name(), "source", b.Source,
				"destination", b.Destination, "reason", we.Text)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// users imports the users, in RabbitMQ's order the first thing. A user
// whose password_hash Wharf cannot use (RabbitMQ's own algorithms) is
// left out with a warning: its permissions are then left out too.
func (imp *importer) users(defs *definitions) {
	for _, u := range defs.Users {
		creds, err := parsePasswordHash(u.PasswordHash, u.HashingAlgorithm)
		if err == nil {
			err = imp.s.cfg.Users.PutCredentials(u.Name, creds, u.Tags)
		}
		if err != nil {
			imp.s.cfg.Logger.Warn("definitions import: user skipped", "user", u.Name, "reason", err)
		}
	}
}

// permissions imports the permissions and topic permissions of users
// that exist.
func (imp *importer) permissions(defs *definitions) error {
	known := func(user string) bool {
		_, ok := imp.s.cfg.Users.Get(user)
		if !ok {
			imp.s.cfg.Logger.Warn("definitions import: permission of a missing user skipped", "user", user)
		}
		return ok
	}
	for _, p := range defs.Permissions {
		if known(p.User) {
			if err := imp.s.cfg.Access.SetPermission(p); err != nil {
				return err
			}
		}
	}
	for _, p := range defs.TopicPermissions {
		if known(p.User) {
			if err := imp.s.cfg.Access.SetTopicPermission(p); err != nil {
				return err
			}
		}
	}
	return nil
}
