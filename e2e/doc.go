// Package e2e holds Wharf's end-to-end client compatibility tests: a real
// node (internal/nodetest) on 127.0.0.1 is driven over TCP by unmodified
// stock Kafka clients through their public APIs only — franz-go (kgo,
// kadm), segmentio/kafka-go, IBM/sarama and, when installed, kcat
// (librdkafka). A test here failing means a client people actually use
// would break against Wharf.
//
// The management API (management_test.go) is driven by the tools that
// use RabbitMQ's: rabbitmqadmin (Debian's rabbitmq-server ships it; the
// test fails without it) and amqp091-go's connection recovery. With
// -e2e.amqp091-recovery, amqp091-go's own TestConnectionRecovery* tests
// run too, unchanged from the module cache (about two minutes); they
// need 127.0.0.1:15672 free, the port they hard-code for the API.
//
// The web console (console_test.go) is driven in headless Chromium
// (Debian's chromium; the test fails without it) through chromedp: log
// in, browse a topic, watch lag appear, reset a group's offsets after a
// preview, get and purge a queue, move dead letters back. With
// -e2e.console-screenshots=DIR it saves PNGs of the main pages there
// (docs/ keeps them: go test ./e2e -run Console -e2e.console-screenshots=$PWD/docs).
//
// With -e2e.kafkago-suite, segmentio/kafka-go's own test suite runs,
// unchanged from the module cache, against a node set up as its
// docker-compose broker (about four minutes; -e2e.kafkago-run narrows it,
// -e2e.kafkago-version sets the KAFKA_VERSION it is told, 3.7.0 by
// default); it needs localhost:9092 and :9093 free and logs the pass and
// fail counts and each failure. On 2026-12-02 (node with kafka-go's
// docker-image settings, group.initial.rebalance.delay.ms=0): 912 passed,
// 0 failed, 6 skipped (counts include parent tests), and
// TestReaderConsumerGroup/consumer_group_rebalance reported apart as
// timing-dependent: it passes only when the second reader's first
// JoinGroup reaches the coordinator after the first reader's first
// SyncGroup, and the coordinator answers as Kafka's at each step
// (internal/group TestJoinBeforeLeaderSyncsVoidsTheGeneration,
// TestRejoinAfterRebalanceTimeoutIsUnknownMember); 1 pass in 10 runs of it
// alone. Not run: the three subtests that read offsets
// through kafka-go's getOffsets helper, which calls a nil function and
// panics against any broker, ending kafka-go's whole test binary.
//
// The package has no non-test code beyond this comment.
package e2e
