package mq

import (
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq/routing"
)

// bindingRef is a binding with its source.
type bindingRef struct {
	src *exchange
	b   routing.Binding[dest]
}

// BindQueue is queue.bind: the exchange (checked first) and the queue must
// exist (404), neither may be the default exchange (403), an exclusive
// queue must be conn's (405), a headers binding needs a valid x-match (406).
// Binding twice is not an error. A direct reply-to name is no queue to
// bind (403, replyto.go).
func (v *VHost) BindQueue(queue, exchange, key string, args amqpwire.Table, conn ConnID) error {
	if err := checkBindable(queue); err != nil {
		return err
	}
	return v.bind(exchange, queue, false, key, args, conn)
}

// UnbindQueue is queue.unbind. A binding that does not exist is not an
// error; the exchange and queue must (404). An auto-delete exchange left
// without bindings is deleted.
func (v *VHost) UnbindQueue(queue, exchange, key string, args amqpwire.Table, conn ConnID) error {
	if err := checkBindable(queue); err != nil {
		return err
	}
	return v.unbindCaughtUp(exchange, queue, false, key, args, conn)
}

// BindExchange is exchange.bind: messages routed by src that match key and
// args are routed on by dst.
func (v *VHost) BindExchange(dst, src, key string, args amqpwire.Table) error {
	return v.bind(src, dst, true, key, args, 0)
}

// UnbindExchange is exchange.unbind.
func (v *VHost) UnbindExchange(dst, src, key string, args amqpwire.Table) error {
	return v.unbindCaughtUp(src, dst, true, key, args, 0)
}

// unbindCaughtUp is unbind, caught up with the cluster if this node has
// no such binding: it may have been made on another node just now, and
// an unbind that missed it would answer unbind-ok and leave it.
func (v *VHost) unbindCaughtUp(srcName, dstName string, toExchange bool, key string, args amqpwire.Table, conn ConnID) error {
	had, err := v.unbind(srcName, dstName, toExchange, key, args, conn)
	if err == nil && !had && v.r.catchUpAll(barrierWait) {
		_, err = v.unbind(srcName, dstName, toExchange, key, args, conn)
	}
	return err
}

// resolveBinding finds both ends of a binding, with RabbitMQ's errors
// (501 for names or a key that are not valid UTF-8, see checkUTF8).
// Caller holds defMu.
func (v *VHost) resolveBinding(srcName, dstName string, toExchange bool, key string, conn ConnID) (*exchange, dest, error) {
	if err := checkUTF8(srcName, dstName, key); err != nil {
		return nil, dest{}, err
	}
	if srcName == "" || (toExchange && dstName == "") {
		return nil, dest{}, errDefaultExchange()
	}
	if v.isDeleted() {
		return nil, dest{}, errNoVHost(v.name)
	}
	src := v.exchanges[srcName]
	if src == nil {
		return nil, dest{}, errNotFound("exchange", srcName, v.name)
	}
	var d dest
	if toExchange {
		if d.x = v.exchanges[dstName]; d.x == nil {
			return nil, dest{}, errNotFound("exchange", dstName, v.name)
		}
		return src, d, nil
	}
	if d.q = v.queues[dstName]; d.q == nil {
		return nil, dest{}, errNotFound("queue", dstName, v.name)
	}
	if d.q.def.Exclusive && d.q.def.Owner != conn {
		return nil, dest{}, errLocked(dstName, v.name)
	}
	return src, d, nil
}

func (v *VHost) bind(srcName, dstName string, toExchange bool, key string, args amqpwire.Table, conn ConnID) error {
	v.catchUpOnEnds(srcName, dstName, toExchange)
	v.defMu.Lock()
	defer v.defMu.Unlock()
	src, d, err := v.resolveBinding(srcName, dstName, toExchange, key, conn)
	if err != nil {
		return err
	}
	if err := routing.Validate(src.kind, key, args); err != nil {
		return errPrecondition("%s", err.Error())
	}
	b := routing.Binding[dest]{Dest: d, Key: key, Args: args}
	if src.bindings.Has(b) {
		return nil
	}
	if err := v.storeBinding(src, b); err != nil {
		return err
	}
	v.mu.Lock()
	_, err = v.addBindingLocked(src, d, key, args)
	v.mu.Unlock()
	if err != nil {
		return errPrecondition("%s", err.Error())
	}
	return nil
}

// unbind deletes a binding, and reports whether there was one.
func (v *VHost) unbind(srcName, dstName string, toExchange bool, key string, args amqpwire.Table, conn ConnID) (bool, error) {
	v.catchUpOnEnds(srcName, dstName, toExchange)
	v.defMu.Lock()
	var cleanup deletions
	had, err := func() (bool, error) {
		src, d, err := v.resolveBinding(srcName, dstName, toExchange, key, conn)
		if err != nil {
			return false, err
		}
		b := routing.Binding[dest]{Dest: d, Key: key, Args: args}
		if !src.bindings.Has(b) {
			return false, nil
		}
		if err := v.unstoreBinding(src, b); err != nil {
			return false, err
		}
		v.mu.Lock()
		v.removeBindingLocked(src, b)
		emptied := src.def.AutoDelete && src.bindings.Len() == 0
		v.mu.Unlock()
		if emptied {
			return true, v.deleteExchangeLocked(src, &cleanup)
		}
		return true, nil
	}()
	v.defMu.Unlock()
	cleanup.run(v.r)
	return had, err
}

// catchUpOnEnds catches up with the cluster (cluster.go) when this node
// does not know an end of a binding: it may have been declared on another
// node just now.
func (v *VHost) catchUpOnEnds(srcName, dstName string, toExchange bool) {
	var missing []string
	if v.exchange(srcName) == nil {
		missing = append(missing, exchangeKey(v.name, srcName))
	}
	switch {
	case toExchange && v.exchange(dstName) == nil:
		missing = append(missing, exchangeKey(v.name, dstName))
	case !toExchange && v.queue(dstName) == nil:
		missing = append(missing, queueKey(v.name, dstName))
	}
	if len(missing) > 0 {
		v.r.catchUp(missing...)
	}
}

// addBindingLocked adds a binding and its back-reference. Caller holds mu
// for writing (or is loading, before anyone else can see the vhost).
func (v *VHost) addBindingLocked(src *exchange, d dest, key string, args amqpwire.Table) (bool, error) {
	added, err := src.bindings.Add(routing.Binding[dest]{Dest: d, Key: key, Args: args})
	if err != nil || !added {
		return false, err
	}
	if d.q != nil {
		d.q.sources[src]++
	} else {
		d.x.sources[src]++
	}
	if src.observer != nil {
		src.observer.BindingAdded(key)
	}
	return true, nil
}

// removeBindingLocked removes a binding and its back-reference. Caller
// holds mu for writing.
func (v *VHost) removeBindingLocked(src *exchange, b routing.Binding[dest]) {
	if !src.bindings.Remove(b) {
		return
	}
	var m map[*exchange]int
	if b.Dest.q != nil {
		m = b.Dest.q.sources
	} else {
		m = b.Dest.x.sources
	}
	if m[src]--; m[src] <= 0 {
		delete(m, src)
	}
	if src.observer != nil {
		src.observer.BindingRemoved(b.Key)
	}
}

// bindingRecordOf returns the stored form of a binding, and whether it is
// durable (both ends are).
func (v *VHost) bindingRecordOf(src *exchange, b routing.Binding[dest]) (bindingRecord, bool, error) {
	rec := bindingRecord{VHost: v.name, Source: src.def.Name, Key: b.Key}
	durable := src.def.Durable && src.def.Name != ""
	if b.Dest.q != nil {
		rec.DestKind, rec.Destination = destQueue, b.Dest.q.name
		durable = durable && b.Dest.q.recorded()
	} else {
		rec.DestKind, rec.Destination = destExchange, b.Dest.x.def.Name
		durable = durable && b.Dest.x.def.Durable
	}
	if !durable {
		return rec, false, nil
	}
	args, err := encodeArgs(b.Args)
	if err != nil {
		return rec, false, errPrecondition("invalid binding arguments: %v", err)
	}
	rec.Args = args
	return rec, true, nil
}

func (v *VHost) storeBinding(src *exchange, b routing.Binding[dest]) error {
	rec, durable, err := v.bindingRecordOf(src, b)
	if err != nil || !durable {
		return err
	}
	rec.Seq = v.r.bindingSeq.Add(1)
	if err := v.r.defs.Put(bindingKey(v.name, rec), mustJSON(rec)); err != nil {
		return errInternal("store binding", err)
	}
	return nil
}

func (v *VHost) unstoreBinding(src *exchange, b routing.Binding[dest]) error {
	rec, durable, err := v.bindingRecordOf(src, b)
	if err != nil || !durable {
		return nil
	}
	if err := v.r.defs.Delete(bindingKey(v.name, rec)); err != nil {
		return errInternal("delete binding", err)
	}
	return nil
}
