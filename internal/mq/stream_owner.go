package mq

// StreamQueueOf returns the stream queue whose log is topic, as
// "queue 'name' in vhost 'v'", if one is declared. The Kafka core asks
// (through the stream bridge's hook, broker.Config.TopicInUse) before a
// Kafka client deletes the topic or changes its partition count, either of
// which would leave the queue broken.
func (r *Registry) StreamQueueOf(topic string) (queue string, ok bool) {
	r.streamMu.Lock()
	defer r.streamMu.Unlock()
	queue, ok = r.streamOwners[topic]
	return queue, ok
}
