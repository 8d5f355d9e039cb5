// Package access is Wharf's authorization for AMQP and the management
// API: RabbitMQ's internal authorization backend. Authentication (who a
// user is, its tags) is internal/users'; this package says what a user
// may do in a virtual host.
//
// A user may use a vhost only when it has a permission there: three
// regular expressions, configure, write and read, matched against the
// names of the queues and exchanges it acts on (RabbitMQ's
// rabbit_auth_backend_internal: unanchored, "" matches nothing, the
// default exchange is matched as "amq.default"). Topic permissions narrow
// what may be published to (write) and bound from (read) one topic
// exchange: expressions matched against routing keys, in which
// {username} and {vhost} stand for the user's and the vhost's names. An
// exchange without topic permission for the user is not narrowed.
//
// Principal holds the rules of each AMQP operation as rabbit_channel
// checks them (queue.declare: configure on the queue, and for a new
// queue with a dead-letter exchange read on the queue and write on that
// exchange; basic.publish: write on the exchange and topic write on the
// routing keys; queue.bind: write on the queue, read on the exchange and
// topic read on the binding key; basic.consume, basic.get and
// queue.purge: read; passive declares: any of the three), so that the
// AMQP front end and the management API refuse the same things with the
// same 403 ACCESS_REFUSED texts.
//
// Expressions are Go's (RE2) rather than RabbitMQ's PCRE: the same for
// the usual "^prefix\.", ".*" and alternations; lookarounds and
// backreferences are refused when the permission is set.
//
// The store keeps its records in the node's definition store (keys
// "access/..."), durable before a change returns, and serves checks from
// memory. Changes apply to the next operation of every connection. In a
// cluster every node follows the metadata log: a change made through any
// node applies on each as that node applies it, and a user's permission
// in a vhost that a node does not know (connection.open, the management
// API) is looked up again once the node caught up with the cluster, so a
// permission given through one node opens the vhost on every other right
// after.
package access
