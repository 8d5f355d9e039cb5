package mq

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Policy is a RabbitMQ 4.x policy: the settings of Definition apply to
// every queue and/or exchange of VHost whose name matches Pattern (a
// regular expression, unanchored) and that ApplyTo selects. Of the
// policies matching an object the one with the highest Priority applies
// (ties go to the lowest name); policies are never merged.
//
// The JSON form is the management API's.
type Policy struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Definition map[string]any `json:"definition"`
	Priority   int            `json:"priority"`
}

// Values of Policy.ApplyTo. "queues" means queues of every type.
const (
	ApplyToQueues        = "queues"
	ApplyToClassicQueues = "classic_queues"
	ApplyToQuorumQueues  = "quorum_queues"
	ApplyToStreams       = "streams"
	ApplyToExchanges     = "exchanges"
	ApplyToAll           = "all"
)

// PolicyError is a policy that does not validate; Reason says why in plain
// words, wrapped as RabbitMQ wraps its reasons ("Validation failed\n\n...")
// (the management API answers 400 with it).
type PolicyError struct{ Reason string }

func (e *PolicyError) Error() string { return e.Reason }

func policyErrorf(format string, args ...any) *PolicyError {
	return &PolicyError{Reason: "Validation failed\n\n" + fmt.Sprintf(format, args...) + "\n"}
}

// policy is a validated Policy with its compiled pattern.
type policy struct {
	Policy
	re *regexp.Regexp
}

// Definition keys and how a queue argument and a policy value of the same
// setting combine (rabbit_policies and the queue types in RabbitMQ 4.x):
// for limits and timeouts the lower one applies, for everything else the
// queue's own argument wins. Keys that Wharf accepts but does not act on
// (queue-mode, queue-version, ...) have no merge rule and no argument.
type policyKey struct {
	arg   string                     // the queue argument it stands for, "" if none
	check valueCheck                 // what values it takes
	lower func(pol, arg int64) int64 // nil: the argument wins
}

// valueCheck says whether a definition value is valid and, for the error
// when it is not, what a valid one is, in words.
type valueCheck struct {
	want  string
	valid func(v any) bool
}

func minInt(pol, arg int64) int64 { return min(pol, arg) }

// minDeliveryLimit is rabbit_quorum_queue's: a negative limit (unlimited)
// on either side loses to a real one.
func minDeliveryLimit(pol, arg int64) int64 {
	if pol < 0 || arg < 0 {
		return max(pol, arg)
	}
	return min(pol, arg)
}

var policyKeys = map[string]policyKey{
	"message-ttl":                   {"x-message-ttl", intIn(0, maxExpiry, "milliseconds"), minInt},
	"expires":                       {"x-expires", intIn(1, maxExpiry, "milliseconds"), minInt},
	"max-length":                    {"x-max-length", intIn(0, -1, "messages"), minInt},
	"max-length-bytes":              {"x-max-length-bytes", intIn(0, -1, "bytes"), minInt},
	"delivery-limit":                {"x-delivery-limit", intIn(-1, -1, "deliveries, -1 for no limit"), minDeliveryLimit},
	"consumer-timeout":              {"x-consumer-timeout", intIn(0, -1, "milliseconds"), minInt},
	"overflow":                      {"x-overflow", oneOf("drop-head", "reject-publish", "reject-publish-dlx"), nil},
	"dead-letter-exchange":          {"x-dead-letter-exchange", anyString("an exchange name"), nil},
	"dead-letter-routing-key":       {"x-dead-letter-routing-key", anyString("a routing key"), nil},
	"dead-letter-strategy":          {"x-dead-letter-strategy", oneOf("at-most-once", "at-least-once"), nil},
	"max-age":                       {"x-max-age", maxAge, nil},
	"stream-max-segment-size-bytes": {"x-stream-max-segment-size-bytes", intIn(0, maxStreamSegmentBytes, "bytes"), nil},
	"alternate-exchange":            {"", anyString("an exchange name"), nil},
	"queue-mode":                    {"", oneOf("default", "lazy"), nil},
	"queue-version":                 {"", intIn(1, 2, ""), nil},
	"queue-leader-locator":          {"", oneOf("client-local", "balanced"), nil},
	"max-in-memory-length":          {"", intIn(0, -1, "messages"), nil},
	"max-in-memory-bytes":           {"", intIn(0, -1, "bytes"), nil},
	"initial-cluster-size":          {"", intIn(1, -1, "nodes"), nil},
	"target-group-size":             {"", intIn(1, -1, "nodes"), nil},
}

// intIn takes integers from lo to hi (hi < 0: no upper bound) counting
// unit.
func intIn(lo, hi int64, unit string) valueCheck {
	want := fmt.Sprintf("an integer of %d or more", lo)
	switch {
	case lo == 0 && hi < 0:
		want = "a non-negative integer"
	case hi >= 0:
		want = fmt.Sprintf("an integer from %d to %d", lo, hi)
	}
	if unit != "" {
		want += " (" + unit + ")"
	}
	return valueCheck{want, func(v any) bool {
		n, ok := v.(int64)
		return ok && n >= lo && (hi < 0 || n <= hi)
	}}
}

func anyString(what string) valueCheck {
	return valueCheck{"a string (" + what + ")", func(v any) bool {
		s, ok := v.(string)
		return ok && utf8.ValidString(s)
	}}
}

func oneOf(values ...string) valueCheck {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	return valueCheck{"one of " + strings.Join(quoted, ", "), func(v any) bool {
		s, ok := v.(string)
		return ok && slices.Contains(values, s)
	}}
}

var maxAge = valueCheck{`a positive integer and a unit, one of Y, M, D, h, m, s (such as "7D")`, func(v any) bool {
	s, ok := v.(string)
	if ok {
		_, ok = parseMaxAge(s)
	}
	return ok
}}

// plainValue prints a definition value as the JSON it came as (a string
// that is not valid UTF-8, which JSON cannot carry, with Go's escapes).
func plainValue(v any) string {
	if s, ok := v.(string); ok && !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// normalizeDefinition turns JSON-decoded values into what policies hold:
// integral numbers as int64 (decoded with UseNumber or as float64).
func normalizeDefinition(def map[string]any) map[string]any {
	out := make(map[string]any, len(def))
	for k, v := range def {
		switch n := v.(type) {
		case json.Number:
			if i, err := n.Int64(); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		case float64:
			if n == float64(int64(n)) {
				v = int64(n)
			}
		case int:
			v = int64(n)
		case int32:
			v = int64(n)
		}
		out[k] = v
	}
	return out
}

// compilePolicy validates p as rabbit_policy does and compiles its
// pattern. An empty ApplyTo means "all", as in rabbitmqctl. The errors say
// in plain words what is wrong and what would be right.
func compilePolicy(p Policy) (*policy, error) {
	if p.ApplyTo == "" {
		p.ApplyTo = ApplyToAll
	}
	applyTo := oneOf(ApplyToQueues, ApplyToClassicQueues, ApplyToQuorumQueues, ApplyToStreams, ApplyToExchanges, ApplyToAll)
	if !applyTo.valid(p.ApplyTo) {
		return nil, policyErrorf("apply-to must be %s, got %s", applyTo.want, plainValue(p.ApplyTo))
	}
	switch {
	case p.Name == "":
		return nil, policyErrorf("policy name must not be empty")
	case !utf8.ValidString(p.Name):
		return nil, policyErrorf("policy name must be valid UTF-8, got %s", plainValue(p.Name))
	case !utf8.ValidString(p.Pattern):
		return nil, policyErrorf("pattern must be valid UTF-8, got %s", plainValue(p.Pattern))
	}
	re, err := regexp.Compile(p.Pattern)
	if err != nil {
		return nil, policyErrorf("pattern %s is not a valid regular expression: %v", plainValue(p.Pattern), err)
	}
	if len(p.Definition) == 0 {
		return nil, policyErrorf("the policy definition is empty: give at least one setting, such as {\"max-length\": 1000}")
	}
	p.Definition = normalizeDefinition(p.Definition)
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(p.Definition)) {
		key, ok := policyKeys[k]
		if !ok {
			unknown = append(unknown, strconv.Quote(k))
			continue
		}
		if v := p.Definition[k]; !key.check.valid(v) {
			return nil, policyErrorf("%s must be %s, got %s", k, key.check.want, plainValue(v))
		}
	}
	if len(unknown) > 0 {
		return nil, policyErrorf("not recognised policy settings: %s (known settings: %s)",
			strings.Join(unknown, ", "), strings.Join(slices.Sorted(maps.Keys(policyKeys)), ", "))
	}
	if _, ok := p.Definition["dead-letter-routing-key"]; ok {
		if _, ok := p.Definition["dead-letter-exchange"]; !ok {
			return nil, policyErrorf("dead-letter-routing-key requires dead-letter-exchange")
		}
	}
	return &policy{Policy: p, re: re}, nil
}

// appliesTo reports whether the policy selects a queue of type kind
// (exchange false) or an exchange (exchange true) named name.
func (p *policy) appliesTo(exchange bool, kind queueType, name string) bool {
	switch p.ApplyTo {
	case ApplyToAll:
	case ApplyToExchanges:
		if !exchange {
			return false
		}
	case ApplyToQueues:
		if exchange {
			return false
		}
	case ApplyToClassicQueues:
		if exchange || kind != classicQueue {
			return false
		}
	case ApplyToQuorumQueues:
		if exchange || kind != quorumQueue {
			return false
		}
	case ApplyToStreams:
		if exchange || kind != streamQueue {
			return false
		}
	}
	return p.re.MatchString(name)
}

// policyFor returns the policy that applies to an object, nil if none.
func (v *VHost) policyFor(exchange bool, kind queueType, name string) *policy {
	v.polMu.RLock()
	defer v.polMu.RUnlock()
	var best *policy
	for _, p := range v.policies {
		if !p.appliesTo(exchange, kind, name) {
			continue
		}
		if best == nil || p.Priority > best.Priority || (p.Priority == best.Priority && p.Name < best.Name) {
			best = p
		}
	}
	return best
}

// effectiveArgs merges a queue's arguments with its policy's definition:
// the arguments the queue then behaves as if declared with.
func effectiveArgs(args amqpwire.Table, p *policy) amqpwire.Table {
	if p == nil {
		return args
	}
	out := maps.Clone(args)
	if out == nil {
		out = amqpwire.Table{}
	}
	for k, val := range p.Definition {
		key := policyKeys[k]
		if key.arg == "" {
			continue
		}
		cur, present := out[key.arg]
		if !present {
			out[key.arg] = val
			continue
		}
		if key.lower == nil {
			continue // the argument wins
		}
		a, okA := argInt(cur)
		b, okB := val.(int64)
		if okA && okB {
			out[key.arg] = key.lower(b, a)
		}
	}
	return out
}

// effectiveQueueArgs is effectiveArgs for a queue about to be declared.
func (v *VHost) effectiveQueueArgs(d QueueDef) (amqpwire.Table, *policy) {
	p := v.policyFor(false, queueTypeOf(d.Args), d.Name)
	return effectiveArgs(d.Args, p), p
}

// policyKey is the definition store key of a policy.
func policyStoreKey(vhost, name string) string {
	return policyKeyPrefix + esc(vhost) + "/" + esc(name)
}

type policyRecord struct {
	VHost      string          `json:"vhost"`
	Name       string          `json:"name"`
	Pattern    string          `json:"pattern"`
	ApplyTo    string          `json:"apply_to"`
	Priority   int             `json:"priority"`
	Definition json.RawMessage `json:"definition"`
}

// record is the stored form of p.
func (p *policy) record() policyRecord {
	return policyRecord{VHost: p.VHost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
		Priority: p.Priority, Definition: mustJSON(p.Definition)}
}

// decodePolicyRecord turns a stored record back into a Policy.
func decodePolicyRecord(rec policyRecord) (Policy, error) {
	p := Policy{VHost: rec.VHost, Name: rec.Name, Pattern: rec.Pattern, ApplyTo: rec.ApplyTo, Priority: rec.Priority}
	dec := json.NewDecoder(strings.NewReader(string(rec.Definition)))
	dec.UseNumber()
	if err := dec.Decode(&p.Definition); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// SetPolicy creates or replaces a policy (p.VHost is ignored: the policy
// belongs to v), durably, and applies it at once to the queues and
// exchanges it now governs, and to those of a policy it displaces. An
// invalid policy is a *PolicyError.
//
// A queue then behaves as if its arguments were merged with the winning
// policy's definition: for message-ttl, expires, max-length,
// max-length-bytes, delivery-limit and consumer-timeout the lower of the
// argument and the policy value, for the other keys the argument if the
// queue has one. Messages already in a queue keep the expiry they got
// when enqueued (as in RabbitMQ); a lower length limit drops (and
// dead-letters) from the head at once. max-priority is not a policy
// setting (RabbitMQ refuses it too). A stream queue takes max-age,
// max-length-bytes and stream-max-segment-size-bytes from a policy only
// when it is declared.
func (v *VHost) SetPolicy(p Policy) error {
	p.VHost = v.name
	cp, err := compilePolicy(p)
	if err != nil {
		return err
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.isDeleted() {
		return errNoVHost(v.name)
	}
	if err := v.r.defs.Put(policyStoreKey(v.name, cp.Name), mustJSON(cp.record())); err != nil {
		return errInternal("store policy", err)
	}
	v.polMu.Lock()
	v.policies[cp.Name] = cp
	v.polMu.Unlock()
	v.applyPolicies()
	return nil
}

// DeletePolicy removes a policy durably and takes it off the objects it
// governed (another matching policy may then apply). A missing policy is
// a 404 *Error.
func (v *VHost) DeletePolicy(name string) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.polMu.RLock()
	_, ok := v.policies[name]
	v.polMu.RUnlock()
	if !ok {
		return errNotFound("policy", name, v.name)
	}
	if err := v.r.defs.Delete(policyStoreKey(v.name, name)); err != nil {
		return errInternal("delete policy", err)
	}
	v.polMu.Lock()
	delete(v.policies, name)
	v.polMu.Unlock()
	v.applyPolicies()
	return nil
}

// Policies returns the vhost's policies sorted by name.
func (v *VHost) Policies() []Policy {
	v.polMu.RLock()
	defer v.polMu.RUnlock()
	out := make([]Policy, 0, len(v.policies))
	for _, p := range v.policies {
		out = append(out, p.public())
	}
	slices.SortFunc(out, func(a, b Policy) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Policy returns the named policy.
func (v *VHost) Policy(name string) (Policy, bool) {
	v.polMu.RLock()
	defer v.polMu.RUnlock()
	p, ok := v.policies[name]
	if !ok {
		return Policy{}, false
	}
	return p.public(), true
}

// public is a copy the caller may keep and modify.
func (p *policy) public() Policy {
	out := p.Policy
	out.Definition = maps.Clone(p.Definition)
	return out
}

// ExchangePolicy returns the policy that applies to the named exchange.
func (v *VHost) ExchangePolicy(name string) (Policy, bool) {
	if p := v.policyFor(true, 0, name); p != nil {
		return p.public(), true
	}
	return Policy{}, false
}

// applyPolicies brings every queue and exchange of v in line with the
// current policies. Caller holds defMu (so no queue is created meanwhile)
// and no other lock.
func (v *VHost) applyPolicies() {
	v.mu.Lock()
	for _, x := range v.exchanges {
		v.applyExchangePolicyLocked(x)
	}
	qs := make([]*queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	v.mu.Unlock()
	for _, q := range qs {
		q.applyPolicy(v.policyFor(false, q.opts.kind, q.name))
	}
}

// applyExchangePolicyLocked sets x's alternate exchange: its argument, or
// else its policy's. Caller holds v.mu for writing (or owns x alone).
func (v *VHost) applyExchangePolicyLocked(x *exchange) {
	if x.def.Name == "" {
		return
	}
	if ae, ok := x.def.Args["alternate-exchange"].(string); ok {
		x.alternate = ae
		return
	}
	x.alternate = ""
	if p := v.policyFor(true, 0, x.def.Name); p != nil {
		x.alternate, _ = p.Definition["alternate-exchange"].(string)
	}
}

// applyPolicy recomputes the queue's options from its arguments and
// policy p (nil: none) and acts on the change: a lower length limit drops
// from the head, expired heads go, x-expires counts from now. The queue
// type and priority levels never change (no policy key sets them).
func (q *queue) applyPolicy(p *policy) {
	if q.stream != nil {
		return // stream retention is set when the topic is created
	}
	o := parseQueueOptions(effectiveArgs(q.def.Args, p))
	q.mu.Lock()
	defer q.unlock()
	if q.deleted {
		return
	}
	cur := &q.opts
	cur.messageTTL, cur.expires = o.messageTTL, o.expires
	cur.dlx, cur.hasDLX, cur.dlrk, cur.hasDLRK = o.dlx, o.hasDLX, o.dlrk, o.hasDLRK
	cur.maxLength, cur.maxBytes, cur.overflow = o.maxLength, o.maxBytes, o.overflow
	cur.deliveryLimit, cur.consumerTimeout = o.deliveryLimit, o.consumerTimeout
	now := q.r.nowMs()
	if cur.limited() && cur.overflow == dropHead {
		q.dropOverflowLocked(now)
	}
	q.touchLocked()
	q.expireHeadsLocked(now)
	q.armHeadsLocked()
}

// loadPolicies installs stored policies at Open (before queues and
// exchanges are built, so they are built with them). Invalid ones are
// logged and left out.
func (r *Registry) loadPolicies(recs []policyRecord) {
	for _, rec := range recs {
		v := r.vhosts[rec.VHost]
		if v == nil {
			continue
		}
		p, err := decodePolicyRecord(rec)
		var cp *policy
		if err == nil {
			cp, err = compilePolicy(p)
		}
		if err != nil {
			r.logger.Warn("mq: dropping invalid policy", "vhost", rec.VHost, "policy", rec.Name, "err", err)
			continue
		}
		v.policies[cp.Name] = cp
	}
}

// deletePoliciesLocked removes a deleted vhost's policies from the store.
// Caller holds defMu.
func (v *VHost) deletePoliciesLocked() error {
	v.polMu.Lock()
	names := slices.Collect(maps.Keys(v.policies))
	clear(v.policies)
	v.polMu.Unlock()
	for _, n := range names {
		if err := v.r.defs.Delete(policyStoreKey(v.name, n)); err != nil {
			return errInternal("delete policy", err)
		}
	}
	return nil
}
