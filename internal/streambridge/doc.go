// Package streambridge makes AMQP stream queues Kafka topics. It belongs to
// neither core: it gives the queueing core (internal/mq) its StreamStore
// over the Kafka core's (internal/broker) topics, so that the stream queue
// "orders" and the topic "orders" are one log, and it tells the Kafka core
// which topics stream queues own (broker.Config.TopicInUse), so that Kafka
// clients cannot delete them or change their partition count. The node
// (internal/node) wires both; neither core imports the other or this
// package.
package streambridge
