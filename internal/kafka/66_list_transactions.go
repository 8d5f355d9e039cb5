package kafka

import (
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// knownTxnStates are the state names ListTransactions filters on.
var knownTxnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// ListTransactions (key 66), v0-v2: every transactional id, filtered by
// state, producer id, how long its transaction has been open (v1+) and an
// re2 pattern on the id (v2+). Unknown state names are echoed back in
// UnknownStateFilters. Only ids the principal may DESCRIBE are listed.
func (s *Server) handleListTransactions(r *request, req *kmsg.ListTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	txns, err := s.transactions()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		if pattern, err = regexp.Compile(*req.TransactionalIDPattern); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
	}
	var states []string
	for _, f := range req.StateFilters {
		if slices.Contains(knownTxnStates, f) {
			states = append(states, f)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
	}
	now := time.Now()
	for _, d := range txns.List() {
		switch {
		case len(req.StateFilters) > 0 && !slices.Contains(states, d.State),
			len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, d.ProducerID),
			req.Version >= 1 && req.DurationFilterMillis >= 0 && (d.Started.IsZero() || now.Sub(d.Started).Milliseconds() < req.DurationFilterMillis),
			pattern != nil && !pattern.MatchString(d.TransactionalID),
			!s.mayDo(r, opDescribe, resTxnID, d.TransactionalID):
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.TransactionalID, d.ProducerID, d.State
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
