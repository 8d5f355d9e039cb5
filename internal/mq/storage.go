package mq

import (
	"fmt"

	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/quorumstore"
	"github.com/wharf-mq/wharf/internal/replica"
)

// queueStore is what a durable queue asks of its storage; the local one is
// internal/queuestore's Store, made by the registry's queuestore.Root. The
// package doc of queuestore states the contract, and what changes for a
// replicated store (a Raft group per quorum queue): offsets are the
// store's, never made up by the queue, and every change to a logged
// message's fate (enqueued, delivered, settled, returned) is told to the
// store, so that it can be replayed from the log alone. Methods named
// ...Locked are called with the queue's lock held. How a store takes a
// message differs (queue.logLocked): the local one as a batch
// (batchStore), a quorum queue's as a record of its next batch.
type queueStore interface {
	// DeliveredLocked records that the message at off was handed out.
	DeliveredLocked(off int64)
	// SettleLocked records that the message at off is done with;
	// NoteReturnLocked that it was returned n times (quorum queues).
	SettleLocked(off int64)
	NoteReturnLocked(off int64, n uint32)
	// ReadLocked reads messages back from off on (page-in).
	ReadLocked(off, maxBytes int64, fn func(off, ts int64, m queuestore.Message) bool) error
	// Unsettled and Scan are recovery: the messages the store holds
	// after Open, and their contents.
	Unsettled(fn func(off int64, redelivered bool, returns uint32))
	Scan(off int64, fn func(off, ts int64, m queuestore.Message) bool) error
	// Sync makes what was appended or buffered durable: what a
	// publisher confirm waits for (through the registry's syncer).
	replica.Target
	// CloseWithoutMarker gives a crashed queue's store up; Delete
	// removes a deleted queue's data.
	CloseWithoutMarker()
	Delete() error
	Dir() string
}

// batchStore is how the local store takes a message: BufferLocked gives a
// message batch (storedMessage.encoded) its offset and holds it back, to
// be written with the queue's other held-back messages before the next
// Sync; AppendLocked writes it now.
type batchStore interface {
	BufferLocked(batch []byte) (off int64, err error)
	AppendLocked(batch []byte) (off int64, err error)
}

// storedMessage is a persistent message as queue stores log it, made once
// per publish: with its encoded properties, enqueued at (ms). The batch
// the local store and a forward take is encoded once, when first asked
// for; a quorum queue's store takes the message as it is.
type storedMessage struct {
	msg   queuestore.Message
	at    int64
	batch []byte
	// forwarded names a message of a publish another node forwarded to
	// a quorum queue's leader (quorumstore.ForwardedAs).
	forwarded quorumstore.ForwardedAs
}

// newStoredMessage is m, with its encoded properties, enqueued at (ms).
func newStoredMessage(m *Message, props []byte, at int64) *storedMessage {
	return &storedMessage{msg: queuestore.Message{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Properties: props, Body: m.Body}, at: at}
}

// encoded is the batch the message is logged as in a local store.
func (sm *storedMessage) encoded() []byte {
	if sm.batch == nil {
		sm.batch = queuestore.EncodeMessage(sm.msg, sm.at)
	}
	return sm.batch
}

// encodeProperties returns the raw property list a message is logged with.
func encodeProperties(m *Message) ([]byte, error) {
	if m.RawProperties != nil {
		return m.RawProperties, nil
	}
	return m.Properties.Encode(nil)
}

// decodeStored rebuilds a message read back from a queue store.
func decodeStored(sm queuestore.Message) (*Message, error) {
	m := &Message{Exchange: sm.Exchange, RoutingKey: sm.RoutingKey, RawProperties: sm.Properties, Body: sm.Body}
	if len(m.RawProperties) > 0 {
		if err := m.Properties.Decode(m.RawProperties); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// decoding adapts fn, which takes decoded messages, to a store's read
// callback. A message that cannot be decoded ends the read, its error (a
// damaged log's, see queuestore.IsDamage) left in *bad.
func decoding(fn func(off, ts int64, m *Message) bool, bad *error) func(off, ts int64, sm queuestore.Message) bool {
	return func(off, ts int64, sm queuestore.Message) bool {
		m, err := decodeStored(sm)
		if err != nil {
			*bad = fmt.Errorf("message at offset %d: %w", off, err)
			return false
		}
		return fn(off, ts, m)
	}
}
