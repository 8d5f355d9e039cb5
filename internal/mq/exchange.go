package mq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
)

// exchange is one exchange and the bindings whose source it is. Everything
// but def and caughtUpAt is guarded by the vhost's mu.
type exchange struct {
	def       ExchangeDef
	kind      routing.Kind
	alternate string         // alternate-exchange argument, "" if none
	builtin   bool           // predeclared: "" and amq.*
	hashOn    routing.HashOn // x-consistent-hash: what it hashes

	// bindings is nil for the default exchange, whose bindings are
	// implicit (every queue by its name).
	bindings *routing.Table[dest]
	// sources counts the bindings from other exchanges to this one, by
	// source, so deleting this exchange finds them without a scan.
	sources map[*exchange]int
	// observer shares this exchange's routing with another protocol's
	// subscribers (observer.go); nil for most.
	observer ExchangeObserver
	// caughtUpAt is when (the coarse clock, ms) a publish through this
	// exchange that reached no queue last set out to catch up with the
	// cluster (routeCaughtUp).
	caughtUpAt atomic.Int64
}

// claimCatchUp reports whether a publish through x that reached no queue
// at now (the coarse clock) catches up first: if none set out to in the
// last unroutableCatchUpMs; it claims the turn if so.
func (x *exchange) claimCatchUp(now int64) bool {
	last := x.caughtUpAt.Load()
	return now-last >= unroutableCatchUpMs && x.caughtUpAt.CompareAndSwap(last, now)
}

// dest is a binding destination: a queue or an exchange.
type dest struct {
	q *queue
	x *exchange
}

func newExchange(d ExchangeDef, kind routing.Kind) *exchange {
	x := &exchange{def: d, kind: kind, sources: make(map[*exchange]int)}
	if ae, ok := d.Args["alternate-exchange"].(string); ok {
		x.alternate = ae
	}
	if d.Name != "" {
		x.bindings = routing.NewTable[dest](kind)
	}
	if kind == routing.ConsistentHash {
		x.hashOn, _ = routing.ParseHashOn(d.Args)
	}
	return x
}

// DeclareExchange is exchange.declare. Passive only checks that the
// exchange exists (404). Otherwise an unknown type is 503 COMMAND_INVALID
// (the types are direct, fanout, topic, headers and x-consistent-hash,
// whose hash-header and hash-property arguments are checked: 406),
// a new name starting with "amq." is 403, and an existing exchange must be
// equivalent (type, durable, auto-delete, internal, alternate-exchange;
// 406). The default exchange cannot be declared at all (403). A name or
// type that is not valid UTF-8 is 501 (see checkUTF8).
func (v *VHost) DeclareExchange(d ExchangeDef, passive bool) error {
	if err := checkUTF8(d.Name, d.Type); err != nil {
		return err
	}
	if d.Name == "" {
		return errDefaultExchange()
	}
	if passive && v.exchange(d.Name) == nil {
		v.r.catchUp(exchangeKey(v.name, d.Name)) // maybe declared on another node just now
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.isDeleted() {
		return errNoVHost(v.name)
	}
	x := v.exchanges[d.Name]
	if passive {
		if x == nil {
			return errNotFound("exchange", d.Name, v.name)
		}
		return nil
	}
	kind, ok := routing.ParseKind(d.Type)
	if !ok {
		return amqpwire.Errorf(amqpwire.CodeCommandInvalid, "unknown exchange type '%s'", d.Type)
	}
	if x != nil {
		return v.exchangeEquivalent(x, d)
	}
	if strings.HasPrefix(d.Name, "amq.") {
		return errAccessRefused("exchange name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	if ae, present := d.Args["alternate-exchange"]; present {
		if _, isString := ae.(string); !isString {
			return errPrecondition("invalid type '%s' for arg 'alternate-exchange' in %s",
				routing.TypeName(ae), resource("exchange", d.Name, v.name))
		}
	}
	if kind == routing.ConsistentHash {
		if _, err := routing.ParseHashOn(d.Args); err != nil {
			return errPrecondition("%s", err.Error())
		}
	}
	if d.Durable {
		args, err := encodeArgs(d.Args)
		if err != nil {
			return errPrecondition("invalid arguments for %s: %v", resource("exchange", d.Name, v.name), err)
		}
		rec := mustJSON(exchangeRecord{VHost: v.name, Name: d.Name, Type: d.Type, AutoDelete: d.AutoDelete, Internal: d.Internal, Args: args})
		live, err := v.r.createDefinition(exchangeKey(v.name, d.Name), rec)
		if err != nil {
			return errInternal("store exchange", err)
		}
		if !bytes.Equal(live, rec) { // another node's declare of the name landed first
			x, err := v.existingExchange(live)
			if err != nil {
				return err
			}
			return v.exchangeEquivalent(x, d)
		}
	}
	x = newExchange(d, kind)
	v.mu.Lock()
	v.applyExchangePolicyLocked(x)
	v.exchanges[d.Name] = x
	v.mu.Unlock()
	return nil
}

// existingExchange adds the exchange another node's definition value
// names, as following it would (followExchange), for a declare whose own
// definition was not created. Caller holds defMu.
func (v *VHost) existingExchange(value []byte) (*exchange, error) {
	var rec exchangeRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return nil, errInternal("read exchange", err)
	}
	x, err := exchangeFromRecord(rec)
	switch {
	case err != nil:
		return nil, errInternal("read exchange", err)
	case x == nil:
		return nil, errInternal("read exchange", fmt.Errorf("unknown type %q", rec.Type))
	}
	v.mu.Lock()
	v.applyExchangePolicyLocked(x)
	v.exchanges[rec.Name] = x
	v.mu.Unlock()
	return x, nil
}

func (v *VHost) isDeleted() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.deleted
}

// exchangeEquivalent checks a redeclaration as RabbitMQ's
// rabbit_exchange:assert_equivalence does.
func (v *VHost) exchangeEquivalent(x *exchange, d ExchangeDef) error {
	name := x.def.Name
	fail := func(arg string, received, current any) error {
		return inequivalent(arg, "exchange", name, v.name, quoted(received), quoted(current))
	}
	switch {
	case x.def.Type != d.Type:
		return fail("type", d.Type, x.def.Type)
	case x.def.Durable != d.Durable:
		return fail("durable", d.Durable, x.def.Durable)
	case x.def.AutoDelete != d.AutoDelete:
		return fail("auto_delete", d.AutoDelete, x.def.AutoDelete)
	case x.def.Internal != d.Internal:
		return fail("internal", d.Internal, x.def.Internal)
	}
	return argsEquivalent("exchange", name, v.name, x.def.Args, d.Args, []string{"alternate-exchange"})
}

// argsEquivalent compares the listed arguments as RabbitMQ's
// rabbit_misc:assert_args_equivalence does: same type class (all integer
// types are one class) and equal value, or both absent.
func argsEquivalent(kind, name, vhost string, current, received amqpwire.Table, keys []string) error {
	for _, k := range keys {
		cv, cok := current[k]
		rv, rok := received[k]
		if !cok && !rok {
			continue
		}
		if cok && rok && routing.TypeClass(cv) == routing.TypeClass(rv) && routing.ValuesEqual(cv, rv) {
			continue
		}
		if k == "x-queue-type" && isClassic(cv, cok) && isClassic(rv, rok) {
			continue // no x-queue-type means classic
		}
		return inequivalent(k, kind, name, vhost, describeArg(rv, rok), describeArg(cv, cok))
	}
	return nil
}

func isClassic(v any, present bool) bool {
	return !present || v == "classic"
}

func describeArg(v any, present bool) string {
	if !present {
		return "none"
	}
	return "the value '" + formatValue(v) + "' of type '" + routing.TypeName(v) + "'"
}

// DeleteExchange is exchange.delete. A missing exchange is not an error (as
// in RabbitMQ). The default exchange and amq.* exchanges cannot be deleted
// (403); with ifUnused an exchange that is the source of bindings is 406.
func (v *VHost) DeleteExchange(name string, ifUnused bool) error {
	if name == "" {
		return errDefaultExchange()
	}
	if strings.HasPrefix(name, "amq.") {
		return errAccessRefused("deletion of system %s not allowed", resource("exchange", name, v.name))
	}
	if v.exchange(name) == nil {
		// Maybe declared on another node just now: a delete that missed
		// it would answer delete-ok and leave it.
		v.r.catchUp(exchangeKey(v.name, name))
	}
	v.defMu.Lock()
	var cleanup deletions
	err := func() error {
		x := v.exchanges[name]
		if x == nil {
			return nil
		}
		if ifUnused && x.bindings.Len() > 0 {
			return errPrecondition("%s in use", resource("exchange", name, v.name))
		}
		return v.deleteExchangeLocked(x, &cleanup)
	}()
	v.defMu.Unlock()
	cleanup.run(v.r)
	return err
}

// deleteExchangeLocked removes x, its bindings in both directions and their
// stored definitions, then auto-deletes source exchanges left without
// bindings. Caller holds defMu.
func (v *VHost) deleteExchangeLocked(x *exchange, cleanup *deletions) error {
	if v.exchanges[x.def.Name] != x {
		return nil // already gone (cascades can reach an exchange twice)
	}
	var refs []bindingRef
	for src := range x.sources {
		for _, b := range src.bindings.Bindings() {
			if b.Dest.x == x {
				refs = append(refs, bindingRef{src, b})
			}
		}
	}
	for _, b := range x.bindings.Bindings() {
		refs = append(refs, bindingRef{x, b})
	}
	if !cleanup.followed {
		for _, ref := range refs {
			if err := v.unstoreBinding(ref.src, ref.b); err != nil {
				return err
			}
		}
		if x.def.Durable {
			if err := v.r.defs.Delete(exchangeKey(v.name, x.def.Name)); err != nil {
				return errInternal("delete exchange", err)
			}
		}
	}
	v.mu.Lock()
	var emptied []*exchange
	for _, ref := range refs {
		v.removeBindingLocked(ref.src, ref.b)
		if ref.src != x && ref.src.def.AutoDelete && ref.src.bindings.Len() == 0 && !containsPtr(emptied, ref.src) {
			emptied = append(emptied, ref.src)
		}
	}
	delete(v.exchanges, x.def.Name)
	v.mu.Unlock()
	for _, e := range emptied {
		if err := v.deleteExchangeLocked(e, cleanup); err != nil {
			return err
		}
	}
	return nil
}

func containsPtr[T any](s []*T, p *T) bool {
	for _, x := range s {
		if x == p {
			return true
		}
	}
	return false
}
