package mq

import (
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestPredeclaredExchanges(t *testing.T) {
	e := newEnv(t)
	got := map[string]string{}
	for _, x := range e.v.Exchanges() {
		got[x.Name] = x.Type
	}
	want := map[string]string{"": "direct", "amq.direct": "direct", "amq.fanout": "fanout",
		"amq.topic": "topic", "amq.headers": "headers", "amq.match": "headers"}
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("exchange %q type %q, want %q", name, got[name], typ)
		}
	}
	_, err := e.r.VHost("nope")
	wantCode(t, err, amqpwire.CodeNotAllowed, "NOT_ALLOWED - vhost nope not found")
}

func TestExchangeDeclareErrors(t *testing.T) {
	e := newEnv(t)
	v := e.v
	e.declareExchange("x", "direct", true, nil)

	// Equivalent redeclaration is fine.
	if err := v.DeclareExchange(ExchangeDef{Name: "x", Type: "direct", Durable: true}, false); err != nil {
		t.Fatalf("equivalent redeclare: %v", err)
	}
	cases := []struct {
		def  ExchangeDef
		text string
	}{
		{ExchangeDef{Name: "x", Type: "direct", Durable: false},
			"PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'x' in vhost '/': received 'false' but current is 'true'"},
		{ExchangeDef{Name: "x", Type: "fanout", Durable: true},
			"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"},
		{ExchangeDef{Name: "x", Type: "direct", Durable: true, AutoDelete: true},
			"PRECONDITION_FAILED - inequivalent arg 'auto_delete' for exchange 'x' in vhost '/': received 'true' but current is 'false'"},
		{ExchangeDef{Name: "x", Type: "direct", Durable: true, Internal: true},
			"PRECONDITION_FAILED - inequivalent arg 'internal' for exchange 'x' in vhost '/': received 'true' but current is 'false'"},
		{ExchangeDef{Name: "x", Type: "direct", Durable: true, Args: amqpwire.Table{"alternate-exchange": "ae"}},
			"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': received the value 'ae' of type 'longstr' but current is none"},
	}
	for _, c := range cases {
		wantCode(t, v.DeclareExchange(c.def, false), amqpwire.CodePreconditionFailed, c.text)
	}

	// Passive: 404 for a missing exchange, fine for an existing one whatever the flags.
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "missing"}, true), amqpwire.CodeNotFound,
		"NOT_FOUND - no exchange 'missing' in vhost '/'")
	if err := v.DeclareExchange(ExchangeDef{Name: "x", Type: "fanout"}, true); err != nil {
		t.Errorf("passive declare of existing exchange: %v", err)
	}
	if err := v.DeclareExchange(ExchangeDef{Name: "amq.topic"}, true); err != nil {
		t.Errorf("passive declare of amq.topic: %v", err)
	}

	// Reserved names and the default exchange.
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "amq.custom", Type: "direct"}, false), amqpwire.CodeAccessRefused,
		"ACCESS_REFUSED - exchange name 'amq.custom' contains reserved prefix 'amq.*'")
	if err := v.DeclareExchange(ExchangeDef{Name: "amq.direct", Type: "direct", Durable: true}, false); err != nil {
		t.Errorf("equivalent redeclare of amq.direct: %v", err)
	}
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "amq.direct", Type: "fanout", Durable: true}, false), amqpwire.CodePreconditionFailed, "")
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "", Type: "direct"}, false), amqpwire.CodeAccessRefused,
		"ACCESS_REFUSED - operation not permitted on the default exchange")
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "y", Type: "x-nope"}, false), amqpwire.CodeCommandInvalid,
		"COMMAND_INVALID - unknown exchange type 'x-nope'")
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "y", Type: "direct", Args: amqpwire.Table{"alternate-exchange": int32(1)}}, false),
		amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in exchange 'y' in vhost '/'")
}

func TestExchangeDelete(t *testing.T) {
	e := newEnv(t)
	v := e.v
	wantCode(t, v.DeleteExchange("", false), amqpwire.CodeAccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
	wantCode(t, v.DeleteExchange("amq.fanout", false), amqpwire.CodeAccessRefused,
		"ACCESS_REFUSED - deletion of system exchange 'amq.fanout' in vhost '/' not allowed")
	if err := v.DeleteExchange("missing", false); err != nil {
		t.Errorf("delete of a missing exchange: %v", err)
	}
	e.declareExchange("x", "fanout", false, nil)
	e.declareQueue("q", false)
	e.bind("q", "x", "", nil)
	wantCode(t, v.DeleteExchange("x", true), amqpwire.CodePreconditionFailed, "PRECONDITION_FAILED - exchange 'x' in vhost '/' in use")
	if err := v.DeleteExchange("x", false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "x"}, true), amqpwire.CodeNotFound, "")
	if n := len(v.Bindings()); n != 0 {
		t.Errorf("%d bindings left after deleting their exchange", n)
	}
	// The queue still exists and still gets messages by name.
	e.publish(msg("", "q", "direct"))
	if got := e.drain("q"); len(got) != 1 {
		t.Errorf("queue got %v", got)
	}
}

func TestQueueDeclareErrors(t *testing.T) {
	e := newEnv(t)
	v := e.v
	if _, err := v.DeclareQueue(QueueDef{Name: "q", Durable: true, Args: amqpwire.Table{"x-max-length": int32(10)}}, false); err != nil {
		t.Fatal(err)
	}
	// int64 and int32 are the same type class: equivalent.
	if _, err := v.DeclareQueue(QueueDef{Name: "q", Durable: true, Args: amqpwire.Table{"x-max-length": int64(10), "x-unknown": "ignored"}}, false); err != nil {
		t.Errorf("equivalent redeclare: %v", err)
	}
	cases := []struct {
		def  QueueDef
		text string
	}{
		{QueueDef{Name: "q", Durable: false, Args: amqpwire.Table{"x-max-length": int32(10)}},
			"PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'false' but current is 'true'"},
		{QueueDef{Name: "q", Durable: true, AutoDelete: true, Args: amqpwire.Table{"x-max-length": int32(10)}},
			"PRECONDITION_FAILED - inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'true' but current is 'false'"},
		{QueueDef{Name: "q", Durable: true, Args: amqpwire.Table{"x-max-length": int32(11)}},
			"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received the value '11' of type 'signedint' but current is the value '10' of type 'signedint'"},
		{QueueDef{Name: "q", Durable: true},
			"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received none but current is the value '10' of type 'signedint'"},
	}
	for _, c := range cases {
		_, err := v.DeclareQueue(c.def, false)
		wantCode(t, err, amqpwire.CodePreconditionFailed, c.text)
	}
	// x-queue-type classic equals no x-queue-type.
	e.declareQueue("plain", false)
	if _, err := v.DeclareQueue(QueueDef{Name: "plain", Args: amqpwire.Table{"x-queue-type": "classic"}}, false); err != nil {
		t.Errorf("x-queue-type classic vs none: %v", err)
	}

	_, err := v.DeclareQueue(QueueDef{Name: "missing"}, true)
	wantCode(t, err, amqpwire.CodeNotFound, "NOT_FOUND - no queue 'missing' in vhost '/'")
	_, err = v.DeclareQueue(QueueDef{Name: "amq.q"}, false)
	wantCode(t, err, amqpwire.CodeAccessRefused, "ACCESS_REFUSED - queue name 'amq.q' contains reserved prefix 'amq.*'")

	info, err := v.DeclareQueue(QueueDef{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Name, "amq.gen-") || len(info.Name) != len("amq.gen-")+22 {
		t.Errorf("server-named queue %q", info.Name)
	}
	info2, _ := v.DeclareQueue(QueueDef{}, false)
	if info2.Name == info.Name {
		t.Error("two server-named queues got the same name")
	}
	// Redeclaring a server-named queue by its name is fine.
	if _, err := v.DeclareQueue(QueueDef{Name: info.Name}, false); err != nil {
		t.Errorf("redeclare server-named queue: %v", err)
	}
}

func TestQueueDeclareReportsCounts(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	for range 3 {
		e.publish(msg("", "q", "m"))
	}
	c := newConsumer(0)
	e.consume("q", c, false)
	info, err := e.v.DeclareQueue(QueueDef{Name: "q"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 3 || info.Consumers != 1 {
		t.Errorf("declare-ok %+v, want 3 messages, 1 consumer", info)
	}
}

func TestExclusiveQueues(t *testing.T) {
	e := newEnv(t)
	v := e.v
	const owner, other ConnID = 7, 8
	if _, err := v.DeclareQueue(QueueDef{Name: "ex", Exclusive: true, Durable: true, Owner: owner}, false); err != nil {
		t.Fatal(err)
	}
	locked := "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'ex' in vhost '/'. It could be originally " +
		"declared on another connection or the exclusive property value does not match that of the original declaration."

	_, err := v.DeclareQueue(QueueDef{Name: "ex", Exclusive: true, Owner: other}, false)
	wantCode(t, err, amqpwire.CodeResourceLocked, locked)
	_, err = v.DeclareQueue(QueueDef{Name: "ex", Owner: other}, true)
	wantCode(t, err, amqpwire.CodeResourceLocked, locked)
	_, err = v.DeclareQueue(QueueDef{Name: "ex", Owner: owner}, false) // owner, but not exclusive this time
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, err = v.Consume("ex", ConsumeSpec{Conn: other, Consumer: newConsumer(-1)})
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, _, err = v.Get("ex", true, other)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	_, err = v.PurgeQueue("ex", other)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")
	wantCode(t, v.BindQueue("ex", "amq.direct", "k", nil, other), amqpwire.CodeResourceLocked, "")
	_, err = v.DeleteQueue("ex", false, false, other)
	wantCode(t, err, amqpwire.CodeResourceLocked, "")

	// The owner can do all of it; anyone can publish to it.
	if _, err := v.DeclareQueue(QueueDef{Name: "ex", Exclusive: true, Owner: owner}, false); err != nil {
		t.Errorf("owner redeclare: %v", err)
	}
	if err := v.BindQueue("ex", "amq.direct", "k", nil, owner); err != nil {
		t.Errorf("owner bind: %v", err)
	}
	e.publish(msg("amq.direct", "k", "hello"))
	if d, ok, err := v.Get("ex", true, owner); err != nil || !ok || string(d.Message.Body) != "hello" {
		t.Errorf("owner get: %v %v %v", d, ok, err)
	}
	// Exclusive queues are never durable: nothing stored.
	for _, k := range e.defs.keys() {
		if strings.HasPrefix(k, queueKeyPrefix) {
			t.Errorf("exclusive queue stored as %q", k)
		}
	}

	// Closing another connection leaves it; closing the owner deletes it.
	v.ConnectionClosed(other)
	if _, err := v.DeclareQueue(QueueDef{Name: "ex", Owner: owner}, true); err != nil {
		t.Errorf("queue gone after another connection closed: %v", err)
	}
	v.ConnectionClosed(owner)
	_, err = v.DeclareQueue(QueueDef{Name: "ex", Owner: owner}, true)
	wantCode(t, err, amqpwire.CodeNotFound, "")
	if n := len(v.Bindings()); n != 0 {
		t.Errorf("%d bindings left", n)
	}
}

func TestAutoDeleteQueue(t *testing.T) {
	e := newEnv(t)
	v := e.v
	if _, err := v.DeclareQueue(QueueDef{Name: "ad", AutoDelete: true}, false); err != nil {
		t.Fatal(err)
	}
	// Never had a consumer: stays.
	e.publish(msg("", "ad", "m"))
	if e.messages("ad") != 1 {
		t.Fatal("auto-delete queue without consumers lost its message")
	}
	c1, c2 := newConsumer(-1), newConsumer(-1)
	s1 := e.consume("ad", c1, false)
	s2 := e.consume("ad", c2, false)
	s1.Cancel()
	if _, err := v.DeclareQueue(QueueDef{Name: "ad"}, true); err != nil {
		t.Fatalf("deleted while a consumer remained: %v", err)
	}
	s2.Cancel()
	_, err := v.DeclareQueue(QueueDef{Name: "ad"}, true)
	wantCode(t, err, amqpwire.CodeNotFound, "")
	if c1.cancelled.Load()+c2.cancelled.Load() != 0 {
		t.Error("Cancelled called for consumers that cancelled themselves")
	}
}

func TestAutoDeleteExchange(t *testing.T) {
	e := newEnv(t)
	v := e.v
	if err := v.DeclareExchange(ExchangeDef{Name: "adx", Type: "fanout", AutoDelete: true}, false); err != nil {
		t.Fatal(err)
	}
	e.declareQueue("q1", false)
	e.declareQueue("q2", false)
	e.bind("q1", "adx", "", nil)
	e.bind("q2", "adx", "", nil)
	if err := v.UnbindQueue("q1", "adx", "", nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := v.DeclareExchange(ExchangeDef{Name: "adx"}, true); err != nil {
		t.Fatalf("deleted with a binding left: %v", err)
	}
	// Deleting the last bound queue removes the last binding.
	if _, err := v.DeleteQueue("q2", false, false, 1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "adx"}, true), amqpwire.CodeNotFound, "")

	// Exchange-to-exchange: an auto-delete source goes when its last
	// destination exchange is deleted.
	if err := v.DeclareExchange(ExchangeDef{Name: "src", Type: "topic", AutoDelete: true}, false); err != nil {
		t.Fatal(err)
	}
	e.declareExchange("dst", "fanout", false, nil)
	if err := v.BindExchange("dst", "src", "#", nil); err != nil {
		t.Fatal(err)
	}
	if err := v.DeleteExchange("dst", false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, v.DeclareExchange(ExchangeDef{Name: "src"}, true), amqpwire.CodeNotFound, "")
}

func TestBindErrors(t *testing.T) {
	e := newEnv(t)
	v := e.v
	e.declareQueue("q", false)
	e.declareExchange("h", "headers", false, nil)
	wantCode(t, v.BindQueue("q", "", "q", nil, 1), amqpwire.CodeAccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
	wantCode(t, v.UnbindQueue("q", "", "q", nil, 1), amqpwire.CodeAccessRefused, "")
	wantCode(t, v.BindExchange("", "h", "", nil), amqpwire.CodeAccessRefused, "")
	wantCode(t, v.BindExchange("h", "", "", nil), amqpwire.CodeAccessRefused, "")
	wantCode(t, v.BindQueue("q", "nox", "k", nil, 1), amqpwire.CodeNotFound, "NOT_FOUND - no exchange 'nox' in vhost '/'")
	wantCode(t, v.BindQueue("noq", "amq.direct", "k", nil, 1), amqpwire.CodeNotFound, "NOT_FOUND - no queue 'noq' in vhost '/'")
	wantCode(t, v.BindQueue("noq", "nox", "k", nil, 1), amqpwire.CodeNotFound, "NOT_FOUND - no exchange 'nox' in vhost '/'")
	wantCode(t, v.BindQueue("q", "h", "", amqpwire.Table{"x-match": "some"}, 1), amqpwire.CodePreconditionFailed,
		`PRECONDITION_FAILED - Invalid x-match field value <<"some">>; expected all, any, all-with-x, or any-with-x`)
	// Unbinding what was never bound is fine; binding twice is one binding.
	if err := v.UnbindQueue("q", "amq.direct", "nothing", nil, 1); err != nil {
		t.Errorf("unbind of a missing binding: %v", err)
	}
	e.bind("q", "amq.direct", "k", nil)
	e.bind("q", "amq.direct", "k", nil)
	if n := len(v.Bindings()); n != 1 {
		t.Errorf("%d bindings, want 1", n)
	}
}

func TestVHosts(t *testing.T) {
	e := newEnv(t)
	v2, err := e.r.AddVHost("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.DeclareQueue(QueueDef{Name: "q", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	e.declareQueue("q", true) // same name, another vhost
	c := newConsumer(-1)
	sub, err := v2.Consume("q", ConsumeSpec{Conn: 1, Consumer: c, Cancelled: func() { c.cancelled.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	sub.Resume()
	if got := e.r.VHosts(); len(got) != 2 || got[0] != "/" || got[1] != "other" {
		t.Fatalf("VHosts = %v", got)
	}
	if err := e.r.DeleteVHost("other"); err != nil {
		t.Fatal(err)
	}
	if c.cancelled.Load() != 1 {
		t.Error("consumer of a deleted vhost's queue not cancelled")
	}
	for _, k := range e.defs.keys() {
		if strings.Contains(k, "other") {
			t.Errorf("definition %q left after vhost deletion", k)
		}
	}
	e.restart()
	if got := e.r.VHosts(); len(got) != 1 {
		t.Errorf("VHosts after restart = %v", got)
	}
	if e.messages("q") != 0 {
		t.Error("queue q of / disturbed")
	}
}

// Names are stored as JSON text, which holds only UTF-8: a name with other
// bytes would change at a restart ("q\xff" to "q\uFFFD", merging queues).
// They are refused as RabbitMQ refuses them, with 501 FRAME_ERROR; valid
// UTF-8 names of any script survive a restart unchanged.
func TestNamesMustBeUTF8(t *testing.T) {
	e := newEnv(t)
	const text = "FRAME_ERROR - Malformed UTF-8 in shortstr"
	e.declareQueue("q", true)
	e.declareExchange("x", "direct", true, nil)
	_, err := e.v.DeclareQueue(QueueDef{Name: "q\xff", Durable: true}, false)
	wantCode(t, err, amqpwire.CodeFrameError, text)
	_, err = e.v.DeclareQueue(QueueDef{Name: "q\xff"}, true)
	wantCode(t, err, amqpwire.CodeFrameError, text)
	wantCode(t, e.v.DeclareExchange(ExchangeDef{Name: "x\xff", Type: "direct", Durable: true}, false), amqpwire.CodeFrameError, text)
	wantCode(t, e.v.BindQueue("q", "x", "k\xff", nil, 1), amqpwire.CodeFrameError, text)
	wantCode(t, e.v.BindExchange("x", "amq.topic", "k\xfe", nil), amqpwire.CodeFrameError, text)
	wantCode(t, e.v.UnbindQueue("q", "x", "k\xff", nil, 1), amqpwire.CodeFrameError, text)
	_, err = e.r.AddVHost("v\xff")
	wantCode(t, err, amqpwire.CodeFrameError, text)

	names := []string{"очередь", "キュー", "q\u00e9"}
	for _, n := range names {
		e.declareQueue(n, true)
		e.bind(n, "x", n, nil)
		waitDurable(t, e.publish(persistent("x", n, n)))
	}
	e.restart()
	for _, n := range names {
		if got := e.drain(n); len(got) != 1 || got[0] != n {
			t.Errorf("queue %q after a restart holds %q", n, got)
		}
	}
	if bs := e.v.Bindings(); len(bs) != len(names) {
		t.Errorf("bindings after a restart: %+v", bs)
	}
}
