// Package e2e holds Wharf's end-to-end client compatibility tests: a real
// node (internal/nodetest) on 127.0.0.1 is driven over TCP by unmodified
// stock Kafka clients through their public APIs only — franz-go (kgo,
// kadm), segmentio/kafka-go, IBM/sarama and, when installed, kcat
// (librdkafka). A test here failing means a client people actually use
// would break against Wharf.
//
// The package has no non-test code beyond this comment.
package e2e
