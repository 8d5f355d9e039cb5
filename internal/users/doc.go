// Package users is Wharf's one user store, shared by every protocol: Kafka
// SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), AMQP logins and the
// management API's basic auth.
//
// A user has a name, RabbitMQ's management tags (administrator, management,
// monitoring, policymaker) and salted credentials only: per SCRAM mechanism
// a salt, an iteration count, and the StoredKey and ServerKey of RFC 5802,
// exactly what Kafka keeps per user and mechanism. No password is kept, on
// disk or in memory. A plain password (AMQP PLAIN, Kafka PLAIN, HTTP basic
// auth) is checked by deriving StoredKey from it with the user's salt and
// iterations and comparing in constant time.
//
// A password set through Wharf (the CLI, the management API, the bootstrap
// administrator) sets both mechanisms, as a RabbitMQ user has one password;
// Kafka's AlterUserScramCredentials sets one mechanism at a time from the
// salted password the client computed, as Kafka does, so a user may have
// different SHA-256 and SHA-512 passwords.
//
// The store keeps its records in a KV the node supplies (the metadata log's
// definition store, so users replicate with the cluster's metadata); every
// change is durable before it returns. Reads are served from memory: what
// this node applied of the log, in log order, whichever node wrote it. A
// lookup that misses (a user or credential this node does not know, a
// password that does not match) waits for the cluster first and looks
// again, so a user made or changed through one node logs in on any other
// right after; a password changed or a user deleted through one node is
// refused on another as soon as that node applies the change (one
// replication round trip later: a Kafka broker applies SCRAM credentials
// from the metadata log the same way). A failed plain-password login
// waits so whether the name exists or not; a SCRAM exchange for a name
// this node does not know answers its first message a metadata round trip
// later than for a known name, which a client can time (Kafka refuses an
// unknown name at that message outright).
package users
