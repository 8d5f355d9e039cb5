package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/txn"
)

// withTransactions gives the server a transaction coordinator on its
// broker (and its group coordinator, if an earlier option set one), as the
// node does.
func withTransactions(t *testing.T) serverOption {
	return withServer(func(s *Server) {
		cfg := txn.Config{Broker: s.broker, Logger: testLogger(t)}
		if groups := s.groups.Load(); groups != nil {
			cfg.Groups = groups
			s.broker.OnTxnMarker(groups.CompleteTxn)
		}
		c, err := txn.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s.txns.Store(c)
	})
}

// TestTransactionsWithoutCoordinator: a server given no transaction
// coordinator answers the transaction APIs COORDINATOR_NOT_AVAILABLE and
// creates no __transaction_state of its own.
func TestTransactionsWithoutCoordinator(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	init := kmsg.NewPtrInitProducerIDRequest()
	id := "tx"
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	if r := c.roundTrip(init).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("InitProducerId: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = id
	if r := c.roundTrip(end).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("EndTxn: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	if _, err := ts.b.Topic(txn.StateTopic); err == nil {
		t.Errorf("%s exists on a server without a transaction coordinator", txn.StateTopic)
	}
}

// txnProduce is idempotentProduce for a transactional batch to one
// partition, sent under the given transactional id (nil: none).
func txnProduce(txnID *string, topic string, partition int32, id int64, epoch int16, seq int32, values ...string) *kmsg.ProduceRequest {
	req := idempotentProduce(topic, id, epoch, seq, values...)
	req.TransactionID = txnID
	rp := &req.Topics[0].Partitions[0]
	rp.Partition = partition
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(rp.Records); err != nil {
		panic(err)
	}
	rb.Attributes |= 0x10 // transactional
	rb.CRC = int32(crcOf(rb.AppendTo(nil)))
	rp.Records = rb.AppendTo(nil)
	return req
}

// TestProduceVerifiesTxnPartitions (KIP-890 part 1): a transactional batch
// for a partition that is not in the producer's open transaction is
// refused INVALID_TXN_STATE and not written: before AddPartitionsToTxn,
// for a partition never added, and after EndTxn. Batches of another epoch
// or without a transactional id are refused too. franz-go's ordinary
// transactional flow is unaffected.
func TestProduceVerifiesTxnPartitions(t *testing.T) {
	ts := startServer(t, withTransactions(t))
	topic := ts.createTopic(t, "verify", 2, nil)
	c := ts.dial(t)
	id := "verifier"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	r := c.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("InitProducerId: error %d", r.ErrorCode)
	}
	pid, epoch := r.ProducerID, r.ProducerEpoch
	produce := func(txnID *string, partition int32, epoch int16, seq int32) int16 {
		t.Helper()
		resp := c.roundTrip(txnProduce(txnID, "verify", partition, pid, epoch, seq, "v")).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	endOffset := func(partition int32) int64 {
		t.Helper()
		p, err := topic.Partition(partition)
		if err != nil {
			t.Fatal(err)
		}
		return p.EndOffset()
	}

	if code := produce(&id, 0, epoch, 0); code != kerr.InvalidTxnState.Code {
		t.Errorf("transactional produce before AddPartitionsToTxn: error %d, want INVALID_TXN_STATE", code)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "verify", []int32{0}
	add.Topics = append(add.Topics, at)
	if ar := c.roundTrip(add).(*kmsg.AddPartitionsToTxnResponse); ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: error %d", ar.Topics[0].Partitions[0].ErrorCode)
	}
	if code := produce(&id, 0, epoch, 0); code != 0 {
		t.Fatalf("transactional produce to the added partition: error %d", code)
	}
	if code := produce(&id, 1, epoch, 0); code != kerr.InvalidTxnState.Code {
		t.Errorf("transactional produce to a partition not added: error %d, want INVALID_TXN_STATE", code)
	}
	if code := produce(&id, 0, epoch+1, 0); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("transactional produce at another epoch: error %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if code := produce(nil, 0, epoch, 1); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional batch without a transactional id: error %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if er := c.roundTrip(end).(*kmsg.EndTxnResponse); er.ErrorCode != 0 {
		t.Fatalf("EndTxn: error %d", er.ErrorCode)
	}
	if code := produce(&id, 0, epoch, 1); code != kerr.InvalidTxnState.Code {
		t.Errorf("transactional produce after EndTxn: error %d, want INVALID_TXN_STATE", code)
	}
	// Nothing refused was written: t-0 has the one batch and (once the
	// completion is done) its marker, t-1 nothing.
	if got := endOffset(1); got != 0 {
		t.Errorf("verify-1 end offset %d, want 0: a refused batch was written", got)
	}

	// The ordinary flow: franz-go adds every partition before producing.
	cl := ts.client(t, kgo.TransactionalID("franz"), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for round := range 3 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "verify", Partition: p, Value: []byte(fmt.Sprint(round))}).FirstErr(); err != nil {
				t.Fatalf("round %d: transactional produce to verify-%d: %v", round, p, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
	}
	// 1 raw + 6 franz-go records, all committed.
	if got := consume(t, ts, "verify", 7, kgo.FetchIsolationLevel(kgo.ReadCommitted())); len(got) != 7 {
		t.Errorf("read_committed consumed %d records, want 7", len(got))
	}
}
