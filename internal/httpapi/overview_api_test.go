package httpapi_test

import (
	"encoding/json"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestOverviewAndRates: /api/overview counts what the AMQP clients did,
// with rates, and lists the listeners; a queue's publish rate becomes
// non-zero while messages arrive.
func TestOverviewAndRates(t *testing.T) {
	a, n := newAPI(t)
	ch := channel(t, dial(t, n, ""))
	if _, err := ch.QueueDeclare("rates", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 100))
	for range 10 {
		publish(t, ch, "", "rates", "x")
	}
	for range 10 {
		<-confirms
	}
	o := get[obj](a, "/api/overview")
	if num(o, "message_stats.publish") != 10 || num(o, "message_stats.confirm") != 10 || num(o, "queue_totals.messages") != 10 ||
		num(o, "queue_totals.messages_ready_details.rate") < 0 || num(o, "object_totals.connections") != 1 ||
		num(o, "object_totals.channels") != 1 || num(o, "object_totals.queues") != 1 || o["product_name"] != "Wharf" {
		t.Fatalf("overview: %v", o)
	}
	protocols := map[any]float64{}
	for _, l := range o["listeners"].([]any) {
		protocols[l.(obj)["protocol"]] = num(l.(obj), "port")
	}
	if protocols["amqp"] <= 0 || protocols["http"] <= 0 || protocols["kafka"] <= 0 {
		t.Fatalf("listeners: %v", o["listeners"])
	}
	// Rates compare with an earlier read: keep publishing until one shows.
	waitUntil(t, "a publish rate", func() bool {
		publish(t, ch, "", "rates", "x")
		<-confirms
		q := get[obj](a, "/api/queues/%2F/rates")
		return num(q, "message_stats.publish_details.rate") > 0 && num(q, "messages_details.rate") > 0 &&
			num(get[obj](a, "/api/overview"), "message_stats.publish_details.rate") > 0
	})

	nodes := get[[]obj](a, "/api/nodes")
	if len(nodes) != 1 || nodes[0]["running"] != true || num(nodes[0], "fd_used") <= 0 || num(nodes[0], "mem_limit") <= 0 ||
		num(nodes[0], "disk_free") <= 0 || num(nodes[0], "sockets_used") != 1 {
		t.Fatalf("nodes: %v", nodes)
	}
	if one := get[obj](a, "/api/nodes/"+nodes[0]["name"].(string)); one["name"] != nodes[0]["name"] {
		t.Fatalf("node: %v", one)
	}
	a.want(404, "GET", "/api/nodes/rabbit@elsewhere", "")
	if who := get[obj](a, "/api/whoami"); who["name"] != "guest" {
		t.Fatalf("whoami: %v", who)
	}
	if vs := get[[]obj](a, "/api/vhosts"); len(vs) != 1 || num(vs[0], "messages") < 10 {
		t.Fatalf("vhosts: %v", vs)
	}
}

// TestHealthChecks: alarms answer 200 until a resource alarm is raised,
// then 503 naming it; aliveness-test checks the vhost.
func TestHealthChecks(t *testing.T) {
	a, n := newAPI(t, nodetest.WithConfig(func(c *nodeConfig) { c.AMQP.MemoryHighWatermark = 64 << 10 }))
	if body := a.want(200, "GET", "/api/health/checks/alarms", ""); body != `{"status":"ok"}`+"\n" {
		t.Fatalf("alarms: %s", body)
	}
	a.want(200, "GET", "/api/aliveness-test/%2F", "")
	a.want(404, "GET", "/api/aliveness-test/nosuch", "")

	// Queue more than the 64 KiB high-water mark: the memory alarm goes
	// off (and blocks this publisher, which is why it publishes no more).
	ch := channel(t, dial(t, n, ""))
	if _, err := ch.QueueDeclare("big", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(t.Context(), "", "big", false, false, amqp.Publishing{Body: make([]byte, 128<<10)}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the memory alarm", func() bool {
		code, _, _ := a.do("GET", "/api/health/checks/alarms", "")
		return code == 503
	})
	failed := get503(a, "/api/health/checks/local-alarms")
	alarms, _ := failed["alarms"].([]any)
	if failed["status"] != "failed" || len(alarms) != 1 || alarms[0].(obj)["resource"] != "memory" {
		t.Fatalf("alarms: %v", failed)
	}
	if nodes := get[[]obj](a, "/api/nodes"); nodes[0]["mem_alarm"] != true {
		t.Fatalf("node: %v", nodes[0])
	}
}

func get503(a *api, path string) obj {
	a.t.Helper()
	code, body, _ := a.do("GET", path, "")
	if code != 503 {
		a.t.Fatalf("GET %s: %d %s, want 503", path, code, body)
	}
	var o obj
	if err := json.Unmarshal([]byte(body), &o); err != nil {
		a.t.Fatal(err)
	}
	return o
}
