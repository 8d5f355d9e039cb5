package httpapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestQueueLifecycle: declare (201, then 204; booleans as strings, as
// rabbitmqadmin sends them; 400 when not equivalent), publish through the
// API, get with each ackmode, purge, delete with its conditions.
func TestQueueLifecycle(t *testing.T) {
	a, _ := newAPI(t)
	a.want(201, "PUT", "/api/queues/%2F/jobs", `{"durable":"true","auto_delete":"false","arguments":{"x-max-length":100}}`)
	a.want(204, "PUT", "/api/queues/%2F/jobs", `{"durable":true,"arguments":{"x-max-length":100}}`)
	if body := a.want(400, "PUT", "/api/queues/%2F/jobs", `{"durable":false}`); !strings.Contains(body, "inequivalent arg 'durable'") {
		t.Fatalf("inequivalent redeclare: %s", body)
	}
	if body := a.want(400, "PUT", "/api/queues/%2F/other", `{"durable":"maybe"}`); body != `{"error":"bad_request","reason":["not_boolean","maybe"]}`+"\n" {
		t.Fatalf("bad boolean: %s", body)
	}
	a.want(404, "PUT", "/api/queues/novhost/jobs", `{}`)
	a.want(401, "PUT", "/api/queues/%2F/amq.reserved", `{}`)

	for i, props := range []string{`{"delivery_mode":2,"headers":{"n":1,"tag":"a"},"content_type":"text/plain"}`, `{}`} {
		body := a.want(200, "POST", "/api/exchanges/%2F/amq.default/publish",
			`{"routing_key":"jobs","payload":"job-`+string(rune('1'+i))+`","payload_encoding":"string","properties":`+props+`}`)
		if body != `{"routed":true}`+"\n" {
			t.Fatalf("publish: %s", body)
		}
	}
	if body := a.want(200, "POST", "/api/exchanges/%2F/amq.default/publish",
		`{"routing_key":"nowhere","payload":"aGk=","payload_encoding":"base64","properties":{}}`); body != `{"routed":false}`+"\n" {
		t.Fatalf("unroutable publish: %s", body)
	}
	a.want(400, "POST", "/api/exchanges/%2F/nosuch/publish", `{"routing_key":"k","payload":"x","payload_encoding":"string","properties":{}}`)
	if body := a.want(400, "POST", "/api/exchanges/%2F/amq.default/publish", `{"routing_key":"jobs","payload":"x"}`); !strings.Contains(body, "[{key_missing,properties},{key_missing,payload_encoding}]") {
		t.Fatalf("publish without keys: %s", body)
	}

	type message struct {
		Payload         string         `json:"payload"`
		PayloadEncoding string         `json:"payload_encoding"`
		PayloadBytes    int            `json:"payload_bytes"`
		Redelivered     bool           `json:"redelivered"`
		Exchange        string         `json:"exchange"`
		RoutingKey      string         `json:"routing_key"`
		MessageCount    int            `json:"message_count"`
		Properties      map[string]any `json:"properties"`
	}
	getMessages := func(body string) []message {
		t.Helper()
		var ms []message
		if err := json.Unmarshal([]byte(a.want(200, "POST", "/api/queues/%2F/jobs/get", body)), &ms); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	// ack_requeue_true looks without taking: both come back, redelivered.
	ms := getMessages(`{"count":"5","ackmode":"ack_requeue_true","encoding":"auto"}`)
	if len(ms) != 2 || ms[0].Payload != "job-1" || ms[0].PayloadEncoding != "string" || ms[0].MessageCount != 1 ||
		ms[0].RoutingKey != "jobs" || ms[0].Properties["delivery_mode"] != 2.0 || ms[0].Properties["content_type"] != "text/plain" ||
		ms[0].Properties["headers"].(map[string]any)["tag"] != "a" || ms[0].Redelivered || len(ms[1].Properties) != 0 {
		t.Fatalf("get: %+v", ms)
	}
	ms = getMessages(`{"count":1,"ackmode":"ack_requeue_false","encoding":"base64","truncate":3}`)
	if len(ms) != 1 || !ms[0].Redelivered || ms[0].Payload != "am9i" || ms[0].PayloadEncoding != "base64" || ms[0].PayloadBytes != 5 {
		t.Fatalf("get, ack: %+v", ms)
	}
	q := get[obj](a, "/api/queues/%2F/jobs")
	if num(q, "messages") != 1 || num(q, "messages_ready") != 1 || num(q, "message_stats.publish") != 2 ||
		num(q, "message_stats.get") != 2 || num(q, "message_stats.get_no_ack") != 1 || num(q, "message_stats.redeliver") != 1 ||
		num(q, "message_stats.deliver_get") != 3 || num(q, "messages_details.rate") < 0 || q["arguments"].(obj)["x-max-length"] != 100.0 {
		t.Fatalf("queue after gets: %v", q)
	}
	a.want(400, "POST", "/api/queues/%2F/jobs/get", `{"ackmode":"ack_requeue_true"}`)
	if code, body, _ := a.do("POST", "/api/queues/%2F/missing/get", `{"count":1,"ackmode":"ack_requeue_true","encoding":"auto"}`); code != 404 ||
		!strings.Contains(body, "NOT_FOUND - no queue 'missing'") {
		t.Fatalf("get from a missing queue: %d %s", code, body)
	}

	if body := a.want(400, "DELETE", "/api/queues/%2F/jobs?if-empty=true", ""); !strings.Contains(body, "not empty") {
		t.Fatalf("delete if-empty: %s", body)
	}
	a.want(204, "DELETE", "/api/queues/%2F/jobs/contents", "")
	if q := get[obj](a, "/api/queues/%2F/jobs"); num(q, "messages") != 0 {
		t.Fatalf("after purge: %v", q)
	}
	a.want(204, "DELETE", "/api/queues/%2F/jobs?if-empty=true", "")
	a.want(404, "DELETE", "/api/queues/%2F/jobs", "")
	a.want(404, "DELETE", "/api/queues/%2F/jobs/contents", "")
}

// TestExchangesAndBindings: declare exchanges, bind queue and exchange
// destinations, find bindings by source and destination, and delete one
// by the properties_key the listing gave.
func TestExchangesAndBindings(t *testing.T) {
	a, _ := newAPI(t)
	a.want(201, "PUT", "/api/exchanges/%2F/orders", `{"type":"topic","durable":"true","arguments":{"alternate-exchange":"spill"}}`)
	a.want(204, "PUT", "/api/exchanges/%2F/orders", `{"type":"topic","durable":true,"arguments":{"alternate-exchange":"spill"}}`)
	a.want(400, "PUT", "/api/exchanges/%2F/orders", `{"type":"fanout","durable":true}`)
	a.want(201, "PUT", "/api/exchanges/%2F/audit", `{}`) // type direct
	a.want(201, "PUT", "/api/queues/%2F/eu", `{"durable":true}`)
	if x := get[obj](a, "/api/exchanges/%2F/audit"); x["type"] != "direct" || x["durable"] != false {
		t.Fatalf("exchange declared without a type: %v", x)
	}
	if x := get[obj](a, "/api/exchanges/%2F/amq.default"); x["name"] != "" {
		t.Fatalf("the default exchange: %v", x)
	}

	code, body, header := a.do("POST", "/api/bindings/%2F/e/orders/q/eu", `{"routing_key":"eu.#","arguments":{"x-match":"all"}}`)
	if code != 201 || !strings.HasPrefix(header.Get("Location"), "eu/eu.%23~") {
		t.Fatalf("bind: %d %s, Location %q", code, body, header.Get("Location"))
	}
	a.want(201, "POST", "/api/bindings/%2F/e/orders/q/eu", `{"routing_key":""}`)
	a.want(201, "POST", "/api/bindings/%2F/e/orders/e/audit", `{"routing_key":"#"}`)
	if body := a.want(404, "POST", "/api/bindings/%2F/e/nosuch/q/eu", `{}`); !strings.Contains(body, "no exchange 'nosuch'") {
		t.Fatalf("bind from a missing exchange: %s", body)
	}
	between := get[[]obj](a, "/api/bindings/%2F/e/orders/q/eu")
	if len(between) != 2 {
		t.Fatalf("bindings between orders and eu: %v", between)
	}
	keys := map[string]string{}
	for _, b := range between {
		keys[b["routing_key"].(string)] = b["properties_key"].(string)
	}
	if keys[""] != "~" || !strings.HasPrefix(keys["eu.#"], "eu.%23~") {
		t.Fatalf("properties keys: %v", keys)
	}
	if source := get[[]obj](a, "/api/exchanges/%2F/orders/bindings/source"); len(source) != 3 {
		t.Fatalf("bindings from orders: %v", source)
	}
	if dest := get[[]obj](a, "/api/exchanges/%2F/audit/bindings/destination"); len(dest) != 1 || dest[0]["destination_type"] != "exchange" {
		t.Fatalf("bindings to audit: %v", dest)
	}
	if qb := get[[]obj](a, "/api/queues/%2F/eu/bindings"); len(qb) != 3 || qb[0]["source"] != "" {
		t.Fatalf("bindings of eu (the default exchange's first): %v", qb)
	}
	one := get[obj](a, "/api/bindings/%2F/e/orders/q/eu/"+escapeSegment(keys["eu.#"]))
	if one["arguments"].(obj)["x-match"] != "all" {
		t.Fatalf("one binding: %v", one)
	}
	a.want(204, "DELETE", "/api/bindings/%2F/e/orders/q/eu/"+escapeSegment(keys["eu.#"]), "")
	a.want(404, "DELETE", "/api/bindings/%2F/e/orders/q/eu/"+escapeSegment(keys["eu.#"]), "")
	a.want(404, "GET", "/api/bindings/%2F/e/orders/x/eu", "")
	if left := get[[]obj](a, "/api/bindings/%2F/e/orders/q/eu"); len(left) != 1 {
		t.Fatalf("after unbinding: %v", left)
	}

	if body := a.want(400, "DELETE", "/api/exchanges/%2F/orders?if-unused=true", ""); !strings.Contains(body, "in use") {
		t.Fatalf("delete if-unused: %s", body)
	}
	a.want(204, "DELETE", "/api/exchanges/%2F/orders", "")
	a.want(404, "DELETE", "/api/exchanges/%2F/orders", "")
	a.want(401, "DELETE", "/api/exchanges/%2F/amq.direct", "")
}

// escapeSegment escapes a path segment as rabbitmqadmin does (Python's
// quote with no safe characters).
func escapeSegment(s string) string {
	return strings.NewReplacer("%", "%25", "~", "%7E", "/", "%2F", "#", "%23").Replace(s)
}

// TestDefinitionsRoundTrip: what one node exports, another imports,
// and then exports the same; RabbitMQ's own export (with users and
// parameters Wharf does not import) is accepted.
func TestDefinitionsRoundTrip(t *testing.T) {
	a, _ := newAPI(t)
	a.want(201, "PUT", "/api/queues/%2F/orders", `{"durable":true,"arguments":{"x-queue-type":"quorum","x-delivery-limit":5}}`)
	a.want(201, "PUT", "/api/queues/%2F/scratch", `{"durable":false,"auto_delete":true}`)
	a.want(201, "PUT", "/api/exchanges/%2F/in", `{"type":"topic","durable":true}`)
	a.want(201, "PUT", "/api/exchanges/%2F/fan", `{"type":"fanout","durable":true,"internal":true}`)
	a.want(201, "POST", "/api/bindings/%2F/e/in/q/orders", `{"routing_key":"o.*","arguments":{"k":"v"}}`)
	a.want(201, "POST", "/api/bindings/%2F/e/in/e/fan", `{"routing_key":"#"}`)
	a.want(201, "PUT", "/api/policies/%2F/ttl", `{"pattern":"^orders$","definition":{"message-ttl":60000},"apply-to":"queues","priority":2}`)
	exported := a.want(200, "GET", "/api/definitions", "")

	b, _ := newAPI(t)
	b.want(204, "POST", "/api/definitions", exported)
	again := b.want(200, "GET", "/api/definitions", "")
	var first, second map[string]any
	json.Unmarshal([]byte(exported), &first)
	json.Unmarshal([]byte(again), &second)
	for _, kind := range []string{"vhosts", "queues", "exchanges", "bindings", "policies"} {
		if !reflect.DeepEqual(first[kind], second[kind]) {
			t.Errorf("%s after import:\n%v\nexported:\n%v", kind, second[kind], first[kind])
		}
	}
	if qs := first["queues"].([]any); len(qs) != 2 {
		t.Fatalf("exported queues: %v", qs)
	}
	// Importing again changes nothing and is not an error.
	b.want(204, "POST", "/api/definitions", exported)

	// One vhost's definitions carry no vhost fields and go into the vhost
	// of the path.
	perVHost := b.want(200, "GET", "/api/definitions/%2F", "")
	if strings.Contains(perVHost, `"vhost"`) {
		t.Fatalf("per-vhost export names vhosts: %s", perVHost)
	}
	c, _ := newAPI(t)
	c.want(204, "POST", "/api/definitions/%2F", perVHost)
	if q := get[obj](c, "/api/queues/%2F/orders"); q["type"] != "quorum" || q["policy"] != "ttl" {
		t.Fatalf("queue imported into /: %v", q)
	}

	// RabbitMQ 3.10's export of a queue, with its user and permissions.
	rabbit := `{"rabbit_version":"3.10.8","users":[{"name":"guest","password_hash":"x","hashing_algorithm":"rabbit_password_hashing_sha256","tags":["administrator"],"limits":{}}],
		"vhosts":[{"name":"/"},{"name":"staging"}],"permissions":[{"user":"guest","vhost":"/","configure":".*","write":".*","read":".*"}],
		"topic_permissions":[],"parameters":[],"global_parameters":[{"name":"internal_cluster_id","value":"x"}],"policies":[],
		"queues":[{"name":"from-rabbit","vhost":"staging","durable":true,"auto_delete":false,"arguments":{"x-max-length":100}}],
		"exchanges":[],"bindings":[{"source":"nowhere","vhost":"staging","destination":"from-rabbit","destination_type":"queue","routing_key":"k","arguments":{}}]}`
	c.want(204, "POST", "/api/definitions", rabbit)
	if q := get[obj](c, "/api/queues/staging/from-rabbit"); q["arguments"].(obj)["x-max-length"] != 100.0 {
		t.Fatalf("queue from RabbitMQ's export: %v", q)
	}
	if body := c.want(400, "POST", "/api/definitions", `{"queues":[{"name":"q","vhost":"nosuch","durable":true}]}`); !strings.Contains(body, "no_such_vhost") {
		t.Fatalf("import into a missing vhost: %s", body)
	}
	c.want(400, "POST", "/api/definitions", `not json`)
}

// TestListParameters: columns, sort, sort_reverse and pagination, which
// rabbitmqadmin and RabbitMQ's UI send.
func TestListParameters(t *testing.T) {
	a, _ := newAPI(t)
	for _, q := range []string{"b", "a", "c"} {
		a.want(201, "PUT", "/api/queues/%2F/"+q, `{}`)
	}
	a.want(200, "POST", "/api/exchanges/%2F/amq.default/publish", `{"routing_key":"c","payload":"x","payload_encoding":"string","properties":{}}`)
	got := a.want(200, "GET", "/api/queues?columns=name,messages&sort=messages&sort_reverse=true", "")
	if !strings.HasPrefix(got, `[{"messages":1,"name":"c"},`) || strings.Contains(got, "durable") {
		t.Fatalf("columns and sort: %s", got)
	}
	page := get[obj](a, "/api/queues?page=2&page_size=2&sort=name")
	items := page["items"].([]any)
	if num(page, "total_count") != 3 || num(page, "page_count") != 2 || len(items) != 1 || items[0].(obj)["name"] != "c" {
		t.Fatalf("page 2: %v", page)
	}
	if filtered := get[obj](a, "/api/queues?page=1&name=^[ab]$&use_regex=true"); num(filtered, "filtered_count") != 2 {
		t.Fatalf("name filter: %v", filtered)
	}
	nested := get[[]obj](a, "/api/queues?columns=name,message_stats.publish&sort=name")
	if len(nested) != 3 || num(nested[2], "message_stats.publish") != 1 || len(nested[2]["message_stats"].(obj)) != 1 {
		t.Fatalf("nested column: %v", nested)
	}
	a.want(400, "GET", "/api/queues?page=0", "")
}

// TestNodeWithoutAMQP: the API still answers when the node has no AMQP
// listener.
func TestNodeWithoutAMQP(t *testing.T) {
	a, _ := newAPI(t, nodetest.WithConfig(func(c *nodeConfig) { c.AMQPAddr = "" }))
	if conns := get[[]obj](a, "/api/connections"); len(conns) != 0 {
		t.Fatalf("connections: %v", conns)
	}
	if o := get[obj](a, "/api/overview"); num(o, "object_totals.connections") != 0 {
		t.Fatalf("overview: %v", o)
	}
	a.want(200, "GET", "/api/health/checks/alarms", "")
}
