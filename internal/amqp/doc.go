// Package amqp is Wharf's AMQP 0-9-1 front end. It accepts client
// connections, negotiates them (protocol header, connection.start/tune/open,
// PLAIN and AMQPLAIN authentication against the node's user store,
// internal/users, and over TLS EXTERNAL with a client certificate),
// multiplexes channels and turns each method into calls on the
// message-queuing core, internal/mq, after checking the user's permissions
// as RabbitMQ does (internal/access). It holds no routing or storage
// logic; the wire format lives in internal/amqpwire.
//
// Behaviour follows RabbitMQ 4.x wherever the two differ from the spec:
// basic.qos global=false limits each consumer and global=true the channel;
// immediate=true is refused with 540; unroutable messages without mandatory
// are dropped and still confirmed; confirm and tx modes exclude each other;
// channel_max bounds the number of open channels (530); a delivery left
// unacknowledged past the consumer timeout closes its channel with 406.
// A client's connection.close gets close-ok once its channels and
// exclusive queues are gone, and the client closes the socket (the broker
// only after 3 s); a loopback-only user (guest) logs in from a loopback
// TCP address only; connection.open needs a permission in the vhost (530
// otherwise); an operation the user's permissions do not allow closes
// its channel with 403 and RabbitMQ's text; a failed login closes the
// connection with 403 when the client announced
// authentication_failure_close, else drops the socket.
//
// Flow control: prefetch bounds what a consumer holds; on top of it each
// connection's writer refuses deliveries while more than
// Config.OutboundLimit bytes wait for its socket, so a slow reader (no-ack
// consumers included) leaves messages in their queue rather than in broker
// memory. Resource alarms (memory, disk) block publishing connections as
// RabbitMQ does, with connection.blocked/unblocked.
//
// Where a request goes:
//
//	server.go, config.go  listeners, connection registry, Shutdown, defaults
//	conn.go               one connection: reader loop, frame dispatch, teardown
//	handshake.go          protocol header, start/start-ok, tune/tune-ok, open
//	auth.go               PLAIN, AMQPLAIN, EXTERNAL; loopback-only users
//	writer.go             the connection's writer goroutine, heartbeats, outbound limit
//	buffers.go            read and write buffers lent from pools while a connection is busy
//	alarms.go             memory and disk alarms: connection.blocked/unblocked
//	connection.go         connection-class methods once the connection is open
//	channel.go            channel state, open/close, soft errors, teardown
//	unacked.go            delivery tags awaiting ack, in tag order
//	exchange.go queue.go  exchange.* and queue.*
//	basic_qos.go basic_consume.go basic_get.go basic_ack.go basic_publish.go
//	confirm.go tx.go flow.go
//
// Goroutines: per connection one reader (serving the connection) and one
// writer; per channel in confirm mode one confirm goroutine waiting for
// fsyncs; per Server one alarm monitor. The Server owns them all and
// Shutdown waits for every one. An idle connection holds no read or write
// buffer (buffers.go): about 12 KiB in all, mostly its two goroutines.
//
// Publishes go through the connection's mq.Publisher, which holds stream
// records and fsync waits back until the reader flushes it: when no whole
// frame is left in its buffer (the end of the client's burst), before any
// command other than basic.publish, before it blocks on an alarm or flow
// control, and at teardown. A burst of publishes then costs one append per
// stream and one fsync wait, and its confirms one multiple ack.
package amqp
