package txn

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// produceBatch is a transactional batch of one record as a producer sends
// it: producer id, epoch and sequence stamped, CRC recomputed.
func produceBatch(r InitResult, seq int32) []byte {
	const attrTransactional = 0x10
	b := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte("v")}})
	be := binary.BigEndian
	be.PutUint16(b[21:], be.Uint16(b[21:])|attrTransactional)
	be.PutUint64(b[43:], uint64(r.ProducerID))
	be.PutUint16(b[51:], uint16(r.Epoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestEndTxnBetweenVerifyAndAppend: the coordinator verifies a producer's
// first batch to t-0, then the producer's EndTxn comes first and its
// marker is written to t-0; the batch's append after it is refused
// INVALID_TXN_STATE, where it used to open a transaction the coordinator
// knew nothing of (no marker would ever end it, and t-0's last stable
// offset would stay behind it). Verified again in the next transaction,
// the batch goes in.
func TestEndTxnBetweenVerifyAndAppend(t *testing.T) {
	e := newEnv(t)
	r := e.init("a", time.Minute)
	e.add("a", r, 0)
	p := e.partition("t", 0)
	guard, err := e.c.Verify(t.Context(), "a", r.ProducerID, r.Epoch, 0, "t", p)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := e.c.EndTxn("a", r.ProducerID, r.Epoch, false); err != nil {
		t.Fatalf("EndTxn: %v", err)
	}
	e.wantState("a", "CompleteAbort")
	if _, err := p.AppendVerified(produceBatch(r, 0), -1, guard); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch appended after its transaction's marker: %v, want ErrInvalidTxnState", err)
	}
	if n, lso, hw := p.OngoingTxnProducers(), p.LastStableOffset(), p.HighWatermark(); n != 0 || lso != hw {
		t.Fatalf("t-0: %d transactions open, last stable offset %d below high watermark %d", n, lso, hw)
	}

	e.add("a", r, 0)
	guard, err = e.c.Verify(t.Context(), "a", r.ProducerID, r.Epoch, 0, "t", p)
	if err != nil {
		t.Fatalf("Verify in the next transaction: %v", err)
	}
	if _, err := p.AppendVerified(produceBatch(r, 0), -1, guard); err != nil {
		t.Fatalf("batch of the next transaction: %v", err)
	}
	if p.OngoingTxnProducers() != 1 {
		t.Fatalf("t-0: %d transactions open, want the producer's", p.OngoingTxnProducers())
	}
}
