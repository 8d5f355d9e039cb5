package nats

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/jetstream"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// The JetStream API: a request is a message to $JS.API.<operation>
// (naming its stream and consumer in further tokens), its JSON body the
// arguments; the answer is a JSON message to its reply subject, of type
// io.nats.jetstream.api.v1.<operation>_response, carrying "error" when it
// failed. Shapes, codes and texts are nats-server 2.15's.

const apiPrefix = "$JS.API."

// Page sizes of the listing operations, nats-server's.
const (
	namesPageSize = 1024
	listPageSize  = 256
)

// apiSink takes every message to $JS.API.>.
type apiSink struct{ js *JetStream }

// Deliver answers an API request. A direct get of a stream that does not
// allow them is refused, so that its requester gets no-responders, as
// from nats-server (where nothing subscribes to it).
//
// A request the core sent itself (a client named an API subject as the
// reply subject of a pull request or a publish, and the core sent a
// status or an acknowledgement there) is served later, on the loopback
// goroutine: the core sends from its own goroutines, holding its admin
// lock (a consumer's deletion tells its waiting requests) or as the
// delivery goroutine a consumer's deletion waits for.
func (a apiSink) Deliver(m *subjects.Message) bool {
	op := strings.Split(strings.TrimPrefix(string(m.Subject), apiPrefix), ".")
	if op[0] == "DIRECT" {
		if len(op) < 3 || op[1] != "GET" || !a.js.allowsDirect(op[2]) {
			return false
		}
	}
	reply := string(m.Reply) // may be empty: served all the same, unanswered, as by nats-server
	body := bytes.TrimSpace(m.Payload)
	if m.Source == a.js {
		a.js.serveLater(apiRequest{op: op, reply: reply, body: bytes.Clone(body)})
		return true
	}
	a.js.handle(op, reply, body)
	return true
}

// apiRequest is an API request waiting for the loopback goroutine.
type apiRequest struct {
	op    []string
	reply string
	body  []byte
}

// loopbackQueue bounds the API requests from the core waiting to be
// served; past it they are dropped, as nats-server drops requests when
// its API queue is full.
const loopbackQueue = 64

func (js *JetStream) serveLater(req apiRequest) {
	select {
	case js.loopback <- req:
	default:
		js.log.Warn("jetstream: API request sent by JetStream itself dropped: too many waiting", "subject", apiPrefix+strings.Join(req.op, "."))
	}
}

// serveLoopback serves the API requests the core sent, until Close.
func (js *JetStream) serveLoopback() {
	defer close(js.loopDone)
	for {
		select {
		case <-js.stop:
			return
		case req := <-js.loopback:
			js.handle(req.op, req.reply, req.body)
		}
	}
}

// apiResponse is what every answer carries.
type apiResponse struct {
	Type  string              `json:"type"`
	Error *jetstream.APIError `json:"error,omitempty"`
}

func responseType(op string) string { return "io.nats.jetstream.api.v1." + op + "_response" }

// respond sends an answer, counting it for account info.
func (js *JetStream) respond(reply string, v any, err *jetstream.APIError) {
	js.requests.Add(1)
	if err != nil {
		js.errors.Add(1)
	}
	js.reply(reply, v)
}

// handle dispatches a request by its operation tokens (after $JS.API.).
func (js *JetStream) handle(op []string, reply string, body []byte) {
	n := len(op)
	switch {
	case n == 1 && op[0] == "INFO":
		js.accountInfo(reply)
	case n == 3 && op[0] == "STREAM":
		js.streamRequest(op[1], op[2], reply, body)
	case n == 2 && op[0] == "STREAM" && (op[1] == "NAMES" || op[1] == "LIST"):
		js.streamListing(op[1], reply, body)
	case n == 4 && op[0] == "STREAM" && op[1] == "MSG":
		js.messageRequest(op[2], op[3], reply, body)
	case n >= 3 && op[0] == "DIRECT" && op[1] == "GET":
		js.directGet(op[2], strings.Join(op[3:], "."), reply, body)
	case n >= 3 && op[0] == "CONSUMER" && op[1] == "CREATE":
		js.createConsumer(op[2], op[3:], false, reply, body)
	case n == 5 && op[0] == "CONSUMER" && op[1] == "DURABLE" && op[2] == "CREATE":
		js.createConsumer(op[3], op[4:], true, reply, body)
	case n == 3 && op[0] == "CONSUMER" && (op[1] == "NAMES" || op[1] == "LIST"):
		js.consumerListing(op[1], op[2], reply, body)
	case n == 4 && op[0] == "CONSUMER" && (op[1] == "INFO" || op[1] == "DELETE"):
		js.consumerRequest(op[1], op[2], op[3], reply)
	case n == 5 && op[0] == "CONSUMER" && op[1] == "MSG" && op[2] == "NEXT":
		js.next(op[3], op[4], reply, body)
	case n >= 3 && (op[1] == "LEADER" || op[1] == "PEER") || n >= 2 && op[0] == "META":
		js.respond(reply, apiResponse{Type: responseType("api"), Error: errNotClustered}, errNotClustered)
	case n >= 2:
		js.respond(reply, apiResponse{Type: responseType("api"), Error: errNotSupported}, errNotSupported)
	}
}

var (
	errNotClustered = &jetstream.APIError{Code: 500, ErrCode: 10006, Description: "JetStream not in clustered mode"}
	errNotSupported = &jetstream.APIError{Code: 400, ErrCode: 10003, Description: "bad request: this JetStream API operation is not supported by Wharf"}
)

// decode reads a request body into v; an empty body leaves v as it is.
func decode(body []byte, v any) *jetstream.APIError {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jetstream.ErrInvalidJSON(err)
	}
	return nil
}

// accountInfo answers $JS.API.INFO: the account's usage, without limits.
func (js *JetStream) accountInfo(reply string) {
	type limits struct {
		MaxMemory         int64 `json:"max_memory"`
		MaxStorage        int64 `json:"max_storage"`
		MaxStreams        int   `json:"max_streams"`
		MaxConsumers      int   `json:"max_consumers"`
		MaxAckPending     int   `json:"max_ack_pending"`
		MemoryMaxStreamB  int64 `json:"memory_max_stream_bytes"`
		StorageMaxStreamB int64 `json:"storage_max_stream_bytes"`
		MaxBytesRequired  bool  `json:"max_bytes_required"`
	}
	type apiStats struct {
		Level  int    `json:"level"`
		Total  uint64 `json:"total"`
		Errors uint64 `json:"errors"`
	}
	resp := struct {
		apiResponse
		Memory    uint64   `json:"memory"`
		Storage   uint64   `json:"storage"`
		ReservedM uint64   `json:"reserved_memory"`
		ReservedS uint64   `json:"reserved_storage"`
		Streams   int      `json:"streams"`
		Consumers int      `json:"consumers"`
		Limits    limits   `json:"limits"`
		API       apiStats `json:"api"`
	}{apiResponse: apiResponse{Type: responseType("account_info")}}
	for _, info := range js.core.Streams("") {
		resp.Streams++
		resp.Consumers += info.State.Consumers
		reserved := &resp.ReservedS
		if info.Config.Storage == jetstream.MemoryStorage {
			reserved = &resp.ReservedM
		}
		*reserved += uint64(max(info.Config.MaxBytes, 0))
		resp.Storage += info.State.Bytes // a memory stream is stored on disk too
	}
	resp.Limits = limits{-1, -1, -1, -1, -1, -1, -1, false}
	resp.API = apiStats{Level: apiLevel, Total: js.requests.Load(), Errors: js.errors.Load()}
	js.respond(reply, resp, nil)
}

// apiLevel is the JetStream API level Wharf announces: 0, nats-server
// 2.10's, whose features it implements (not 2.11's pausing, priority
// groups or per-message TTLs, nor the later levels' counters, batches and
// schedules).
const apiLevel = 0

// streamInfoResponse carries a stream's info (and, for STREAM.INFO, the
// paging of its subjects).
type streamInfoResponse struct {
	apiResponse
	*paged
	*jetstream.StreamInfo
	DidCreate bool `json:"did_create,omitempty"`
}

// streamRequest answers the operations on one stream.
func (js *JetStream) streamRequest(op, name, reply string, body []byte) {
	switch op {
	case "CREATE", "UPDATE":
		var cfg jetstream.StreamConfig
		resp := streamInfoResponse{apiResponse: apiResponse{Type: responseType("stream_" + strings.ToLower(op))}}
		if resp.Error = decode(body, &cfg); resp.Error == nil {
			if cfg.Name == "" {
				cfg.Name = name
			}
			switch {
			case cfg.Name != name:
				resp.Error = jetstream.ErrStreamMismatch
			case op == "CREATE":
				resp.StreamInfo, resp.Error = js.core.CreateStream(cfg)
				resp.DidCreate = resp.Error == nil
			default:
				resp.StreamInfo, resp.Error = js.core.UpdateStream(cfg)
			}
		}
		js.respond(reply, resp, resp.Error)
	case "INFO":
		var req struct {
			DeletedDetails bool   `json:"deleted_details"`
			SubjectsFilter string `json:"subjects_filter"`
		}
		resp := streamInfoResponse{apiResponse: apiResponse{Type: responseType("stream_info")}, paged: &paged{}}
		if resp.Error = decode(body, &req); resp.Error == nil {
			resp.StreamInfo, resp.Error = js.core.StreamInfo(name, req.SubjectsFilter, req.DeletedDetails)
		}
		if resp.StreamInfo != nil && req.SubjectsFilter != "" {
			resp.paged = &paged{Total: len(resp.State.Subjects), Limit: jetstream.MaxInfoSubjects}
		}
		js.respond(reply, resp, resp.Error)
	case "DELETE":
		resp := struct {
			apiResponse
			Success bool `json:"success,omitempty"`
		}{apiResponse: apiResponse{Type: responseType("stream_delete")}}
		resp.Error = js.core.DeleteStream(name)
		resp.Success = resp.Error == nil
		js.respond(reply, resp, resp.Error)
	case "PURGE":
		var req jetstream.PurgeRequest
		resp := struct {
			apiResponse
			Success bool   `json:"success,omitempty"`
			Purged  uint64 `json:"purged"`
		}{apiResponse: apiResponse{Type: responseType("stream_purge")}}
		if resp.Error = decode(body, &req); resp.Error == nil {
			resp.Purged, resp.Error = js.core.Purge(name, req)
			resp.Success = resp.Error == nil
		}
		js.respond(reply, resp, resp.Error)
	default:
		js.respond(reply, apiResponse{Type: responseType("api"), Error: errNotSupported}, errNotSupported)
	}
}

// listRequest is the paging (and subject filter) of a listing.
type listRequest struct {
	Offset  int    `json:"offset"`
	Subject string `json:"subject"`
}

// paged is a listing's paging.
type paged struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// page returns the part of n items a listing shows from offset.
func page(n, offset, limit int) (from, to int, p paged) {
	from = min(max(offset, 0), n)
	to = min(from+limit, n)
	return from, to, paged{Total: n, Offset: from, Limit: limit}
}

// streamListing answers STREAM.NAMES and STREAM.LIST.
func (js *JetStream) streamListing(op, reply string, body []byte) {
	var req listRequest
	if err := decode(body, &req); err != nil {
		js.respond(reply, struct {
			apiResponse
			paged
			Streams []string `json:"streams"`
		}{apiResponse: apiResponse{Type: responseType("stream_" + strings.ToLower(op)), Error: err}}, err)
		return
	}
	if op == "NAMES" {
		names := js.core.StreamNames(req.Subject)
		from, to, p := page(len(names), req.Offset, namesPageSize)
		js.respond(reply, struct {
			apiResponse
			paged
			Streams []string `json:"streams"`
		}{apiResponse{Type: responseType("stream_names")}, p, names[from:to]}, nil)
		return
	}
	infos := js.core.Streams(req.Subject)
	from, to, p := page(len(infos), req.Offset, listPageSize)
	js.respond(reply, struct {
		apiResponse
		paged
		Streams []*jetstream.StreamInfo `json:"streams"`
	}{apiResponse{Type: responseType("stream_list")}, p, infos[from:to]}, nil)
}

// storedMsg is a message as STREAM.MSG.GET returns it: headers and data
// base64 (as []byte marshals).
type storedMsg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs,omitempty"`
	Data    []byte    `json:"data,omitempty"`
	Time    time.Time `json:"time"`
}

// messageRequest answers STREAM.MSG.GET and STREAM.MSG.DELETE.
func (js *JetStream) messageRequest(op, stream, reply string, body []byte) {
	switch op {
	case "GET":
		var req jetstream.MsgRequest
		resp := struct {
			apiResponse
			Message *storedMsg `json:"message,omitempty"`
		}{apiResponse: apiResponse{Type: responseType("stream_msg_get")}}
		if resp.Error = decode(body, &req); resp.Error == nil {
			var m *jetstream.Message
			if m, resp.Error = js.core.GetMsg(stream, req); m != nil {
				resp.Message = &storedMsg{Subject: m.Subject, Seq: m.Seq, Header: m.Header, Data: m.Data, Time: m.Time}
			}
		}
		js.respond(reply, resp, resp.Error)
	case "DELETE":
		var req struct {
			Seq uint64 `json:"seq"`
		}
		resp := struct {
			apiResponse
			Success bool `json:"success,omitempty"`
		}{apiResponse: apiResponse{Type: responseType("stream_msg_delete")}}
		if resp.Error = decode(body, &req); resp.Error == nil {
			resp.Error = js.core.DeleteMsg(stream, req.Seq)
			resp.Success = resp.Error == nil
		}
		js.respond(reply, resp, resp.Error)
	default:
		js.respond(reply, apiResponse{Type: responseType("api"), Error: errNotSupported}, errNotSupported)
	}
}

// directGet answers DIRECT.GET: the message itself, its stream, subject,
// sequence and time in headers, or a status (404 Message Not Found, 408
// for a request it cannot read). A subject after the stream's name asks
// for that subject's last message.
func (js *JetStream) directGet(stream, lastBySubject, reply string, body []byte) {
	status := func(code, text string) {
		js.router.Match([]byte(reply)).Deliver(&subjects.Message{Subject: []byte(reply), Header: []byte("NATS/1.0 " + code + " " + text + "\r\n\r\n"), Source: js})
	}
	var req jetstream.MsgRequest
	switch {
	case lastBySubject != "":
		req.LastBySubj = lastBySubject
	case len(body) == 0:
		status("408", "Empty Request")
		return
	default:
		if err := json.Unmarshal(body, &req); err != nil {
			status("408", "Malformed Request")
			return
		}
	}
	m, err := js.core.GetMsg(stream, req)
	if err != nil {
		status("404", "Message Not Found")
		return
	}
	header := directHeader(m, stream)
	js.router.Match([]byte(reply)).Deliver(&subjects.Message{Subject: []byte(reply), Header: header, Payload: m.Data, Source: js})
}

// directHeader is the header block of a direct get's answer: the message's
// own fields, then where it comes from.
func directHeader(m *jetstream.Message, stream string) []byte {
	h := m.Header
	if len(h) < 4 {
		h = []byte("NATS/1.0\r\n\r\n")
	}
	out := append([]byte(nil), h[:len(h)-2]...) // drop the closing empty line
	for _, f := range [][2]string{
		{"Nats-Stream", stream},
		{"Nats-Subject", m.Subject},
		{"Nats-Sequence", itoa(m.Seq)},
		{"Nats-Time-Stamp", m.Time.UTC().Format(time.RFC3339Nano)},
	} {
		out = append(out, f[0]...)
		out = append(out, ": "...)
		out = append(out, f[1]...)
		out = append(out, "\r\n"...)
	}
	return append(out, "\r\n"...)
}
