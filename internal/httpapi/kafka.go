package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/wharf-mq/wharf/internal/kafkaview"
)

// KafkaView is what Wharf's own /api/kafka/ endpoints ask of the Kafka
// side (topics, records, consumer groups); *kafkaview.View implements it.
type KafkaView interface {
	Topics() []kafkaview.TopicSummary
	Topic(name string) (kafkaview.TopicDetail, error)
	Browse(req kafkaview.BrowseRequest) (kafkaview.BrowseResult, error)
	Produce(topic string, req kafkaview.ProduceRequest) (kafkaview.ProduceResult, error)
	Groups() []kafkaview.GroupSummary
	Group(name string) (kafkaview.GroupDetail, error)
	ResetOffsets(group string, req kafkaview.ResetRequest) (kafkaview.ResetResult, error)
	// CatchUp waits until this node applied every topic committed to the
	// cluster's metadata before the call, until ctx ends at most, and
	// reports whether it did (on a single node it reports false: there is
	// nothing to catch up with).
	CatchUp(ctx context.Context) bool
}

// ServeKafka adds Wharf's Kafka endpoints, which RabbitMQ's API has no
// counterpart of, below /api/kafka/: topics with partitions, sizes and
// configs; records of a partition (browse) and produce; consumer groups
// with members and lag; offset resets. Call before Serve. Kafka has no
// vhosts or management tags: reading is open to every management user (as
// RabbitMQ's monitoring views are), writing records and resetting offsets
// to administrators, until Kafka's ACLs are checked here too.
func (s *Server) ServeKafka(k KafkaView) {
	h := kafkaHandlers{view: k, lookupContext: s.lookupContext}
	s.route("GET", "kafka/topics", anyManager, h.listTopics)
	s.route("GET", "kafka/topics/{topic}", anyManager, h.getTopic)
	s.route("GET", "kafka/topics/{topic}/partitions/{partition}/records", anyManager, h.browse)
	s.route("POST", "kafka/topics/{topic}/records", admin, h.produce)
	s.route("GET", "kafka/groups", anyManager, h.listGroups)
	s.route("GET", "kafka/groups/{group}", anyManager, h.getGroup)
	s.route("POST", "kafka/groups/{group}/reset-offsets", admin, h.resetOffsets)
}

type kafkaHandlers struct {
	view          KafkaView
	lookupContext func(*http.Request) (context.Context, context.CancelFunc) // bounds a catch-up (Server.lookupContext)
}

// listTopics is GET /api/kafka/topics.
func (h kafkaHandlers) listTopics(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.view.Topics())
}

// lookedUpTopic is what find finds of a topic; if the topic (or its
// partition) is not found, it catches up with the cluster
// (KafkaView.CatchUp) and looks again. A node applies the topics another
// node creates a replication round later, and the API would answer 404
// right after a CreateTopics through another node, which a Kafka client
// retries but a management client does not. Only a miss waits for the
// cluster (a barrier: a write to the metadata log), lookupWait at most,
// and once a request at most (catchUpOnce).
func lookedUpTopic[T any](h kafkaHandlers, r *http.Request, find func() (T, error)) (T, error) {
	found, err := find()
	if errors.Is(err, kafkaview.ErrNotFound) && catchUpOnce(r) {
		ctx, cancel := h.lookupContext(r)
		defer cancel()
		if h.view.CatchUp(ctx) {
			found, err = find()
		}
	}
	return found, err
}

// getTopic is GET /api/kafka/topics/{topic}.
func (h kafkaHandlers) getTopic(w http.ResponseWriter, r *http.Request) {
	t, err := lookedUpTopic(h, r, func() (kafkaview.TopicDetail, error) { return h.view.Topic(r.PathValue("topic")) })
	writeKafkaResult(w, t, err)
}

// browse is GET /api/kafka/topics/{topic}/partitions/{partition}/records
// ?offset=N|timestamp=MS&limit=N&key=TEXT&header=NAME&header_value=TEXT
// &format=text|json|hex: a page of records, oldest first.
func (h kafkaHandlers) browse(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	partition, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil {
		writeBadRequest(w, "partition "+strconv.Quote(r.PathValue("partition"))+" is not a number")
		return
	}
	req := kafkaview.BrowseRequest{
		Topic: r.PathValue("topic"), Partition: int32(partition), Offset: -1, Timestamp: -1,
		Key: q.Get("key"), Header: q.Get("header"), HeaderValue: q.Get("header_value"), Format: q.Get("format"),
	}
	for _, p := range []struct {
		name string
		into *int64
	}{{"offset", &req.Offset}, {"timestamp", &req.Timestamp}} {
		if v := q.Get(p.name); v != "" {
			if *p.into, err = strconv.ParseInt(v, 10, 64); err != nil {
				writeBadRequest(w, p.name+" "+strconv.Quote(v)+" is not a number")
				return
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		if req.Limit, err = strconv.Atoi(v); err != nil {
			writeBadRequest(w, "limit "+strconv.Quote(v)+" is not a number")
			return
		}
	}
	res, err := lookedUpTopic(h, r, func() (kafkaview.BrowseResult, error) { return h.view.Browse(req) })
	writeKafkaResult(w, res, err)
}

// produce is POST /api/kafka/topics/{topic}/records: one record, answered
// once it is as durable as an acks=all produce.
func (h kafkaHandlers) produce(w http.ResponseWriter, r *http.Request) {
	var body kafkaview.ProduceRequest
	if !decodeBody(w, r, &body, maxPublishBytes) {
		return
	}
	// A try that misses the topic appends nothing: the record is
	// appended once at most.
	res, err := lookedUpTopic(h, r, func() (kafkaview.ProduceResult, error) { return h.view.Produce(r.PathValue("topic"), body) })
	writeKafkaResult(w, res, err)
}

// listGroups is GET /api/kafka/groups.
func (h kafkaHandlers) listGroups(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.view.Groups())
}

// getGroup is GET /api/kafka/groups/{group}.
func (h kafkaHandlers) getGroup(w http.ResponseWriter, r *http.Request) {
	g, err := h.view.Group(r.PathValue("group"))
	writeKafkaResult(w, g, err)
}

// resetOffsets is POST /api/kafka/groups/{group}/reset-offsets: the plan,
// committed when the body says "execute": true.
func (h kafkaHandlers) resetOffsets(w http.ResponseWriter, r *http.Request) {
	var body kafkaview.ResetRequest
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	res, err := h.view.ResetOffsets(r.PathValue("group"), body)
	writeKafkaResult(w, res, err)
}

// writeKafkaResult answers v, or err as 404 (no such topic, partition or
// group), 400 (a request the broker refuses), 409 (the group has live
// members) or 500.
func writeKafkaResult(w http.ResponseWriter, v any, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, kafkaview.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, kafkaview.ErrInvalid):
		writeBadRequest(w, err.Error())
	case errors.Is(err, kafkaview.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
	}
}
