package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics (key 20), v0-v6.
//
// v0-v5 name topics; v6 names them or gives their ID (an unknown ID is
// UNKNOWN_TOPIC_ID, a name and an ID together INVALID_REQUEST). v5+ carries
// an error message. A topic needs DELETE (else TOPIC_AUTHORIZATION_FAILED).

func (s *Server) handleDeleteTopics(r *request, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	if req.Version < 6 {
		for _, name := range req.TopicNames {
			name := name
			resp.Topics = append(resp.Topics, s.deleteTopic(r, kmsg.DeleteTopicsRequestTopic{Topic: &name}))
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, s.deleteTopic(r, rt))
	}
	return resp, nil
}

// deleteTopic deletes one topic given by name or ID.
func (s *Server) deleteTopic(r *request, rt kmsg.DeleteTopicsRequestTopic) kmsg.DeleteTopicsResponseTopic {
	st := kmsg.NewDeleteTopicsResponseTopic()
	st.Topic, st.TopicID = rt.Topic, rt.TopicID
	var (
		name string
		err  error
	)
	switch {
	case rt.Topic != nil && rt.TopicID != [16]byte{}:
		err = kafkaErrorf(kerr.InvalidRequest, "topic name and topic ID cannot both be given")
	case rt.Topic != nil:
		name = *rt.Topic
	case rt.TopicID != [16]byte{}:
		t, lookupErr := s.broker.TopicByID(rt.TopicID)
		if lookupErr != nil {
			err = kafkaErrorf(kerr.UnknownTopicID, "no topic has ID %x", rt.TopicID)
			break
		}
		name = t.Name()
		st.Topic = &name
	default:
		err = kafkaErrorf(kerr.InvalidRequest, "neither topic name nor topic ID given")
	}
	if err == nil && !s.allowed(r, opDelete, resTopic, name) {
		err = errTopicDenied
	}
	if err == nil {
		if t, lookupErr := s.broker.Topic(name); lookupErr == nil {
			st.TopicID = t.ID()
		}
		err = s.broker.DeleteTopic(name)
	}
	if err != nil {
		st.ErrorCode = errorCode(err)
		st.ErrorMessage = errorMessage(err)
	}
	return st
}
