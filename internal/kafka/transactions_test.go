package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/txn"
)

// withTransactions gives the server a transaction coordinator on its
// broker (and its group coordinator, if an earlier option set one), as the
// node does.
func withTransactions(t *testing.T) serverOption {
	return withServer(func(s *Server) {
		cfg := txn.Config{Broker: s.broker, Logger: testLogger(t)}
		if s.groups != nil {
			cfg.Groups = s.groups
		}
		c, err := txn.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s.txns = c
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
