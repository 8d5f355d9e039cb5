package broker

// AutoCreatesTopics reports auto.create.topics.enable: whether
// TopicOrCreate creates a missing topic. The Kafka front end asks before
// checking a client's permission to create one, as Kafka does.
func (b *Broker) AutoCreatesTopics() bool { return *b.cfg.AutoCreateTopics }
