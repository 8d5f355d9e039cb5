package kafka

import (
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/record"
)

// idempotentProduce builds a Produce request carrying one batch of the given
// producer, epoch and base sequence.
func idempotentProduce(topic string, id int64, epoch int16, seq int32, values ...string) *kmsg.ProduceRequest {
	var b record.Builder
	for _, v := range values {
		b.Append(record.Record{Value: []byte(v)})
	}
	rb := kmsg.RecordBatch{}
	if err := rb.ReadFrom(b.Build(time.Now().UnixMilli())); err != nil {
		panic(err)
	}
	rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = id, epoch, seq
	raw := rb.AppendTo(nil)
	// The CRC covers the producer fields: recompute it the way a client does.
	rb.CRC = int32(crcOf(raw))
	raw = rb.AppendTo(nil)

	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestInitProducerIDAndRetriedProduce(t *testing.T) {
	ts := startServer(t, withTransactions(t))
	ts.createTopic(t, "idem", 1, nil)
	c := ts.dial(t)

	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	r := c.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId = id %d epoch %d error %d", r.ProducerID, r.ProducerEpoch, r.ErrorCode)
	}
	again := c.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if again.ProducerID == r.ProducerID {
		t.Errorf("two producers got the same id %d", r.ProducerID)
	}

	produce := func(seq int32, values ...string) (int64, int16) {
		resp := c.roundTrip(idempotentProduce("idem", r.ProducerID, 0, seq, values...)).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		return p.BaseOffset, p.ErrorCode
	}
	if off, code := produce(0, "a", "b"); off != 0 || code != 0 {
		t.Fatalf("first batch: offset %d error %d", off, code)
	}
	// The response was "lost": the client sends the same batch again.
	if off, code := produce(0, "a", "b"); off != 0 || code != 0 {
		t.Errorf("retried batch: offset %d error %d, want the original offset 0", off, code)
	}
	if off, code := produce(5, "x"); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Errorf("sequence gap: offset %d error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", off, code)
	}
	if off, code := produce(2, "c"); off != 2 || code != 0 {
		t.Errorf("next batch: offset %d error %d, want 2", off, code)
	}
	if recs := consume(t, ts, "idem", 3); string(recs[2].Value) != "c" {
		t.Errorf("third record %q, want c (the retry must not be written twice)", recs[2].Value)
	}

	txn := kmsg.NewPtrInitProducerIDRequest()
	id := "txn"
	txn.TransactionalID = &id
	if r := c.roundTrip(txn).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("transactional InitProducerId with timeout 0: error %d, want INVALID_TRANSACTION_TIMEOUT", r.ErrorCode)
	}
	txn.TransactionTimeoutMillis = 60000
	first := c.roundTrip(txn).(*kmsg.InitProducerIDResponse)
	second := c.roundTrip(txn).(*kmsg.InitProducerIDResponse)
	if first.ErrorCode != 0 || second.ErrorCode != 0 || second.ProducerID != first.ProducerID || second.ProducerEpoch != first.ProducerEpoch+1 {
		t.Errorf("transactional InitProducerId twice: %+v then %+v, want the same id at the next epoch", first, second)
	}
}

func crcOf(batch []byte) uint32 {
	return crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli))
}
