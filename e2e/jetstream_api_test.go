package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestJetStreamAPIMatchesNATSServer sends the same JetStream API requests
// and publishes, as raw NATS messages, to nats-server and to Wharf and
// compares every answer (JSON responses field by field, deliveries with
// their headers and reply subjects), leaving out only what differs by
// nature: times, server identities, nats-server's own metadata.
func TestJetStreamAPIMatchesNATSServer(t *testing.T) {
	servers := bothJetStreams(t)
	answers := make([][]string, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		nc, err := nats.Connect(srv.url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Go(func() { // both at once: the script waits for answers that never come
			for _, step := range apiScript {
				answers[i] = append(answers[i], runJSAPIStep(nc, step))
			}
		})
	}
	wg.Wait()
	for i, step := range apiScript {
		if answers[0][i] != answers[1][i] {
			t.Errorf("%s %s\n  wharf:       %s\n  nats-server: %s", step.subject, step.body, answers[0][i], answers[1][i])
		}
	}
}

// apiStep is one request: a message to subject with an optional header
// ("K=V,K=V") and body. pull steps collect every message the reply
// subject gets until it is quiet; others take one answer.
type apiStep struct {
	subject, header, body string
	pull                  bool
}

func req(subject, body string) apiStep { return apiStep{subject: subject, body: body} }
func pub(subject, header, body string) apiStep {
	return apiStep{subject: subject, header: header, body: body}
}
func pull(subject, body string) apiStep { return apiStep{subject: subject, body: body, pull: true} }

var apiScript = []apiStep{
	req("$JS.API.STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.>"],"max_msgs_per_subject":3}`),
	req("$JS.API.STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*"]}`),
	req("$JS.API.STREAM.CREATE.X", `{"name":"Y"}`),
	req("$JS.API.STREAM.CREATE.O2", `{"name":"O2","subjects":["orders.eu"]}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["w.*"],"num_replicas":3}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["w..a"]}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["w.*"],"max_age":1}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["w.*"],"deny_purge":true,"allow_rollup_hdrs":true}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["w.*"],"retention":"bogus"}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["w.*"],"discard_new_per_subject":true}`),
	req("$JS.API.STREAM.CREATE.W", `{"name":"W","subjects":["$JS.API.>"]}`),
	pub("orders.eu", "", "1"),
	pub("orders.us", "Nats-Msg-Id=a", "2"),
	pub("orders.us", "Nats-Msg-Id=a", "2 again"),
	pub("orders.eu", "Nats-Expected-Last-Sequence=1", "3"),
	pub("orders.eu", "Nats-Expected-Last-Sequence=2", "3"),
	pub("orders.eu", "Nats-Expected-Last-Subject-Sequence=1", "3"),
	pub("orders.eu", "Nats-Expected-Stream=OTHER", "4"),
	pub("orders.eu", "Nats-Expected-Last-Msg-Id=a", "4"),
	pub("orders.eu", "Nats-Expected-Last-Msg-Id=zz", "5"),
	pub("orders.eu", "Nats-Rollup=sub", "6"),
	pub("orders.eu", "Nats-TTL=1s", "7"),
	pub("orders.eu", "A=1,B=2", "8"),
	pub("orders.eu", "", "9"),
	req("$JS.API.STREAM.INFO.ORDERS", ``),
	req("$JS.API.STREAM.INFO.ORDERS", `{"subjects_filter":">","deleted_details":true}`),
	req("$JS.API.STREAM.INFO.NOPE", ``),
	req("$JS.API.STREAM.NAMES", ``),
	req("$JS.API.STREAM.NAMES", `{"subject":"orders.eu"}`),
	req("$JS.API.STREAM.NAMES", `{"subject":"nothing"}`),
	req("$JS.API.STREAM.LIST", ``),
	req("$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":2}`),
	req("$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":1}`),
	req("$JS.API.STREAM.MSG.GET.ORDERS", `{"last_by_subj":"orders.eu"}`),
	req("$JS.API.STREAM.MSG.GET.ORDERS", `{"next_by_subj":"orders.eu","seq":5}`),
	req("$JS.API.STREAM.MSG.GET.ORDERS", `{"seq":99}`),
	req("$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":2}`),
	req("$JS.API.STREAM.MSG.DELETE.ORDERS", `{"seq":2}`),
	req("$JS.API.STREAM.INFO.ORDERS", `{"deleted_details":true}`),
	req("$JS.API.DIRECT.GET.ORDERS", `{"seq":4}`),
	req("$JS.API.STREAM.UPDATE.ORDERS", `{"name":"ORDERS","subjects":["orders.>"],"max_msgs_per_subject":3,"allow_direct":true}`),
	req("$JS.API.STREAM.UPDATE.ORDERS", `{"name":"ORDERS","subjects":["orders.>"],"retention":"workqueue"}`),
	req("$JS.API.STREAM.UPDATE.NOPE", `{"name":"NOPE"}`),
	req("$JS.API.DIRECT.GET.ORDERS", `{"seq":8}`),
	req("$JS.API.DIRECT.GET.ORDERS.orders.eu", ``),
	req("$JS.API.DIRECT.GET.ORDERS.orders.none", ``),
	req("$JS.API.DIRECT.GET.ORDERS", ``),
	req("$JS.API.DIRECT.GET.ORDERS", `{"last_by_subj":"orders.eu"}`),

	req("$JS.API.CONSUMER.CREATE.ORDERS.C", `{"stream_name":"ORDERS","config":{"durable_name":"C","ack_policy":"explicit"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.C", `{"stream_name":"ORDERS","action":"create","config":{"durable_name":"C","ack_policy":"explicit","max_deliver":3}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.C", `{"stream_name":"ORDERS","config":{"durable_name":"C","ack_policy":"explicit","max_deliver":3}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.C", `{"stream_name":"ORDERS","config":{"durable_name":"C","ack_policy":"all"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.D.orders.us", `{"stream_name":"ORDERS","config":{"durable_name":"D","filter_subject":"orders.us","ack_policy":"explicit"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.D.orders.eu", `{"stream_name":"ORDERS","config":{"durable_name":"D","filter_subject":"orders.us"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.EPH.orders.us", `{"stream_name":"ORDERS","config":{"name":"EPH","filter_subject":"orders.us","inactive_threshold":60000000000}}`),
	req("$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.E", `{"stream_name":"ORDERS","config":{"durable_name":"E","deliver_subject":"push.e"}}`),
	req("$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.E2", `{"stream_name":"ORDERS","config":{}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.F", `{"stream_name":"ORDERS","config":{"durable_name":"F","deliver_policy":"last_per_subject"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.F", `{"stream_name":"ORDERS","config":{"durable_name":"F","deliver_policy":"last_per_subject","filter_subject":"orders.>"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.G", `{"stream_name":"ORDERS","config":{"durable_name":"G","deliver_policy":"by_start_sequence"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.G", `{"stream_name":"ORDERS","config":{"durable_name":"G","deliver_policy":"by_start_sequence","opt_start_seq":5,"backoff":[1000000000]}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.H", `{"stream_name":"ORDERS","config":{"durable_name":"H","deliver_policy":"last"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.I", `{"stream_name":"ORDERS","config":{"durable_name":"I","deliver_policy":"new"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","config":{"durable_name":"J","filter_subject":"orders.a","filter_subjects":["orders.b"]}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","config":{"durable_name":"J","filter_subjects":["orders.*","orders.eu"]}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","config":{"durable_name":"J","deliver_subject":"orders.x"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","config":{"durable_name":"J","deliver_subject":"x.*"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","config":{"durable_name":"J","idle_heartbeat":1000000000}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","config":{"durable_name":"J","backoff":[1,2],"max_deliver":1}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.J", `{"stream_name":"ORDERS","action":"update","config":{"durable_name":"J"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS.Z", `{"stream_name":"ORDERS","config":{"durable_name":"Y"}}`),
	req("$JS.API.CONSUMER.CREATE.NOPE.Z", `{"stream_name":"NOPE","config":{"durable_name":"Z"}}`),
	req("$JS.API.CONSUMER.CREATE.ORDERS", `{"stream_name":"ORDERS2","config":{}}`),
	req("$JS.API.CONSUMER.INFO.ORDERS.C", ``),
	req("$JS.API.CONSUMER.INFO.ORDERS.NOPE", ``),
	req("$JS.API.CONSUMER.NAMES.ORDERS", ``),
	req("$JS.API.CONSUMER.LIST.ORDERS", ``),

	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", `{"batch":2,"no_wait":true}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", `{"batch":10,"no_wait":true}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", `{"batch":10,"no_wait":true}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", `{"batch":2,"expires":300000000}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.F", `{"batch":5,"no_wait":true}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.G", `3`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.H", `{"batch":5,"expires":300000000}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.D", `{"batch":5,"max_bytes":10,"expires":300000000}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.D", `{"batch":5,"idle_heartbeat":1000000000,"expires":1000000000}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.E", `{"batch":1}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.ORDERS.NOPE", `{"batch":1}`),
	req("$JS.API.CONSUMER.INFO.ORDERS.C", ``),
	req("$JS.API.CONSUMER.INFO.ORDERS.F", ``),
	req("$JS.API.CONSUMER.DELETE.ORDERS.C", ``),
	req("$JS.API.CONSUMER.DELETE.ORDERS.C", ``),

	req("$JS.API.STREAM.PURGE.ORDERS", `{"filter":"orders.us"}`),
	req("$JS.API.STREAM.PURGE.ORDERS", `{"keep":1}`),
	req("$JS.API.STREAM.INFO.ORDERS", `{"deleted_details":true}`),
	req("$JS.API.STREAM.PURGE.ORDERS", ``),
	req("$JS.API.STREAM.INFO.ORDERS", ``),
	req("$JS.API.CONSUMER.INFO.ORDERS.G", ``),

	req("$JS.API.STREAM.CREATE.LIM", `{"name":"LIM","subjects":["lim.*"],"max_msgs":2,"discard":"new"}`),
	pub("lim.a", "", "1"),
	pub("lim.a", "", "2"),
	pub("lim.a", "", "3"),
	req("$JS.API.STREAM.UPDATE.LIM", `{"name":"LIM","subjects":["lim.*"],"max_msgs":1}`),
	req("$JS.API.STREAM.INFO.LIM", ``),
	req("$JS.API.STREAM.CREATE.PER", `{"name":"PER","subjects":["per.*"],"max_msgs_per_subject":1,"discard":"new","discard_new_per_subject":true}`),
	pub("per.a", "", "1"),
	pub("per.a", "", "2"),
	pub("per.b", "", "3"),
	req("$JS.API.STREAM.CREATE.SIZE", `{"name":"SIZE","subjects":["size.*"],"max_bytes":100,"max_msg_size":40}`),
	pub("size.a", "", "01234567890123456789"),
	pub("size.a", "", "01234567890123456789"),
	pub("size.a", "", "0123456789012345678901234567890123456789"),
	req("$JS.API.STREAM.INFO.SIZE", ``),
	req("$JS.API.STREAM.CREATE.SEAL", `{"name":"SEAL","subjects":["seal.*"],"deny_delete":true}`),
	pub("seal.a", "", "1"),
	req("$JS.API.STREAM.MSG.DELETE.SEAL", `{"seq":1}`),
	req("$JS.API.STREAM.UPDATE.SEAL", `{"name":"SEAL","subjects":["seal.*"],"deny_delete":true,"sealed":true}`),
	pub("seal.a", "", "2"),
	req("$JS.API.STREAM.PURGE.SEAL", ``),
	req("$JS.API.STREAM.DELETE.SEAL", ``),
	req("$JS.API.STREAM.DELETE.SEAL", ``),

	req("$JS.API.STREAM.CREATE.WQ", `{"name":"WQ","subjects":["wq.*"],"retention":"workqueue"}`),
	req("$JS.API.CONSUMER.CREATE.WQ.A", `{"stream_name":"WQ","config":{"durable_name":"A","ack_policy":"explicit"}}`),
	req("$JS.API.CONSUMER.CREATE.WQ.B", `{"stream_name":"WQ","config":{"durable_name":"B","ack_policy":"explicit","filter_subject":"wq.b"}}`),
	req("$JS.API.CONSUMER.CREATE.WQ.B", `{"stream_name":"WQ","config":{"durable_name":"B","ack_policy":"none","filter_subject":"wq.b"}}`),
	req("$JS.API.CONSUMER.CREATE.WQ.B", `{"stream_name":"WQ","config":{"durable_name":"B","ack_policy":"explicit","deliver_policy":"last"}}`),
	pub("wq.a", "", "1"),
	pub("wq.a", "", "2"),
	pull("$JS.API.CONSUMER.MSG.NEXT.WQ.A", `{"batch":1,"no_wait":true}`),
	pub("$JS.ACK.WQ.A.1.1.1.0.1", "", "+ACK"),
	req("$JS.API.STREAM.INFO.WQ", ``),

	req("$JS.API.STREAM.CREATE.INT", `{"name":"INT","subjects":["int.*"],"retention":"interest"}`),
	pub("int.a", "", "nobody"),
	req("$JS.API.CONSUMER.CREATE.INT.A", `{"stream_name":"INT","config":{"durable_name":"A","ack_policy":"explicit"}}`),
	req("$JS.API.CONSUMER.CREATE.INT.B", `{"stream_name":"INT","config":{"durable_name":"B","ack_policy":"explicit"}}`),
	pub("int.a", "", "both"),
	pull("$JS.API.CONSUMER.MSG.NEXT.INT.A", `{"batch":1,"no_wait":true}`),
	pub("$JS.ACK.INT.A.1.2.1.0.0", "", "+ACK"),
	req("$JS.API.STREAM.INFO.INT", ``),
	req("$JS.API.CONSUMER.DELETE.INT.B", ``),
	req("$JS.API.STREAM.INFO.INT", ``),

	req("$JS.API.STREAM.CREATE.AGE", `{"name":"AGE","subjects":["age.*"],"max_age":500000000}`),
	pub("age.a", "", "short-lived"),
	req("$JS.API.CONSUMER.CREATE.AGE.T1", `{"stream_name":"AGE","config":{"durable_name":"T1","deliver_policy":"by_start_time","opt_start_time":"2000-01-01T00:00:00Z"}}`),
	req("$JS.API.CONSUMER.CREATE.AGE.T2", `{"stream_name":"AGE","config":{"durable_name":"T2","deliver_policy":"by_start_time","opt_start_time":"2100-01-01T00:00:00Z"}}`),
	pause(2 * time.Second),
	req("$JS.API.STREAM.INFO.AGE", ``),
	req("$JS.API.CONSUMER.INFO.AGE.T1", ``),

	// Malformed requests.
	req("$JS.API.STREAM.CREATE.BAD", `garbage`),
	req("$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":"bad.*"}`),
	req("$JS.API.STREAM.CREATE.BAD", `{"name":"BAD","subjects":["bad.*"],"max_msgs":"ten"}`),
	req("$JS.API.CONSUMER.CREATE.AGE.X", `{"stream_name":"AGE","config":{"durable_name":"X","ack_wait":"long"}}`),
	req("$JS.API.CONSUMER.CREATE.AGE.X", `{"stream_name":"AGE","config":{"durable_name":"X","ack_policy":"sometimes"}}`),
	req("$JS.API.CONSUMER.CREATE.AGE.X", `{"stream_name":"AGE"}`),
	pull("$JS.API.CONSUMER.MSG.NEXT.AGE.T1", `{bad`),
	req("$JS.API.STREAM.MSG.GET.AGE", `{"seq":"one"}`),
	req("$JS.API.STREAM.MSG.DELETE.AGE", `[]`),
	req("$JS.API.STREAM.PURGE.AGE", `{"keep":-1}`),
	pub("$JS.ACK.AGE.T1.x.y.z.t.p", "", "+ACK"),
	pub("$JS.ACK.AGE.T1", "", "+ACK"),
	req("$JS.API.STREAM.INFO.AGE", `{"subjects_filter":7}`),
	req("$JS.API.STREAM.NAMES", `{"offset":"x"}`),
	req("$JS.API.INFO", ``),
}

// pause is a step that sends nothing and waits.
func pause(d time.Duration) apiStep { return apiStep{subject: "", body: d.String()} }

// runJSAPIStep sends a step's message and describes what came back (or what
// failed: it runs on a goroutine of its own).
func runJSAPIStep(nc *nats.Conn, step apiStep) string {
	if step.subject == "" {
		d, _ := time.ParseDuration(step.body)
		time.Sleep(d) // a step of the script: time passing for both servers
		return ""
	}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return "subscribe: " + err.Error()
	}
	defer sub.Unsubscribe()
	m := nats.NewMsg(step.subject)
	m.Reply = inbox
	m.Data = []byte(step.body)
	if step.header != "" {
		for kv := range strings.SplitSeq(step.header, ",") {
			k, v, _ := strings.Cut(kv, "=")
			m.Header.Add(k, v)
		}
	}
	if err := nc.PublishMsg(m); err != nil {
		return "publish: " + err.Error()
	}
	var out []string
	wait := 2 * time.Second
	for {
		r, err := sub.NextMsg(wait)
		if err != nil {
			break
		}
		out = append(out, strings.ReplaceAll(describeAnswer(r), inbox, "INBOX"))
		if !step.pull {
			break
		}
		wait = 700 * time.Millisecond
	}
	if len(out) == 0 {
		return "(no answer)"
	}
	return strings.Join(out, " | ")
}

// volatile are the JSON fields that differ by nature between servers.
var volatile = map[string]bool{"created": true, "ts": true, "first_ts": true, "last_ts": true, "time": true,
	"last_active": true, "cluster": true, "metadata": true, "api": true}

var ackTime = regexp.MustCompile(`^(\$JS\.ACK\.[^.]+\.[^.]+\.\d+\.\d+\.\d+)\.\d+(\.\d+)$`)

// describeAnswer is a message as the comparison sees it: a JSON body
// without its volatile fields (and re-encoded with sorted keys), or a
// delivery with its headers and its reply subject without the time.
func describeAnswer(m *nats.Msg) string {
	var v any
	if len(m.Header) == 0 && json.Unmarshal(m.Data, &v) == nil {
		if obj, ok := v.(map[string]any); ok {
			scrub(obj)
			b, _ := json.Marshal(obj)
			return string(b)
		}
	}
	reply := ackTime.ReplaceAllString(m.Reply, "$1.T$2")
	hdr := maps.Clone(map[string][]string(m.Header))
	delete(hdr, "Nats-Time-Stamp")
	return fmt.Sprintf("msg subj=%s reply=%s hdr=%v data=%q", m.Subject, reply, hdr, m.Data)
}

// scrub removes volatile fields everywhere in a JSON object, and the
// paging fields nats-server puts in STREAM.INFO answers.
func scrub(obj map[string]any) {
	for k, v := range obj {
		if volatile[k] {
			delete(obj, k)
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			scrub(v)
		case []any:
			for _, e := range v {
				if o, ok := e.(map[string]any); ok {
					scrub(o)
				}
			}
		}
	}
	if _, ok := obj["config"]; ok && obj["type"] == "io.nats.jetstream.api.v1.stream_info_response" {
		delete(obj, "total")
		delete(obj, "offset")
		delete(obj, "limit")
	}
	if e, ok := obj["error"].(map[string]any); ok && e["err_code"] == 10025.0 {
		e["description"] = "invalid JSON"
	}
}
