package mq

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Error is an AMQP exception: a reply code and a RabbitMQ-like reply text
// ("NOT_FOUND - no queue 'q' in vhost '/'"). It is amqpwire.Error, so the front
// end can send it as it is: err.In(methodID).CloseMethod(). Codes used here:
// 403 ACCESS_REFUSED, 404 NOT_FOUND, 405 RESOURCE_LOCKED, 406
// PRECONDITION_FAILED (channel errors), 503 COMMAND_INVALID (unknown
// exchange type, a connection error) and 541 INTERNAL_ERROR (storage
// failure).
type Error = amqpwire.Error

// ErrClosed is returned by operations on a closed Registry.
var ErrClosed = errors.New("mq: registry is closed")

// ErrStreamRefused is the Durability error of a message its stream
// refused (the usual cause: a record above the topic's max.message.bytes);
// the refusal was logged. A front end in confirm mode nacks the message,
// as it does one a full queue rejected.
var ErrStreamRefused = errors.New("mq: the stream refused the message")

// resource formats a named entity as RabbitMQ's rabbit_misc:rs does.
func resource(kind, name, vhost string) string {
	return fmt.Sprintf("%s '%s' in vhost '%s'", kind, name, vhost)
}

func errNotFound(kind, name, vhost string) *Error {
	return amqpwire.Errorf(amqpwire.CodeNotFound, "no %s", resource(kind, name, vhost))
}

func errAccessRefused(format string, args ...any) *Error {
	return amqpwire.Errorf(amqpwire.CodeAccessRefused, format, args...)
}

func errPrecondition(format string, args ...any) *Error {
	return amqpwire.Errorf(amqpwire.CodePreconditionFailed, format, args...)
}

func errDefaultExchange() *Error {
	return errAccessRefused("operation not permitted on the default exchange")
}

func errLocked(queue, vhost string) *Error {
	return amqpwire.Errorf(amqpwire.CodeResourceLocked,
		"cannot obtain exclusive access to locked %s. It could be originally declared on another "+
			"connection or the exclusive property value does not match that of the original declaration.",
		resource("queue", queue, vhost))
}

// errInternal reports a storage failure as 541 INTERNAL_ERROR, which closes
// the connection; the cause stays reachable through the log.
func errInternal(what string, err error) *Error {
	return amqpwire.Errorf(amqpwire.CodeInternalError, "%s: %v", what, err)
}

// inequivalent is RabbitMQ's 406 for a redeclaration that differs from the
// existing entity: "inequivalent arg 'durable' for exchange 'x' in vhost
// '/': received 'false' but current is 'true'".
func inequivalent(arg, kind, name, vhost, received, current string) *Error {
	return errPrecondition("inequivalent arg '%s' for %s: received %s but current is %s",
		arg, resource(kind, name, vhost), received, current)
}

func quoted(v any) string { return fmt.Sprintf("'%v'", v) }

// formatValue prints an argument value as RabbitMQ's error texts do:
// binaries as text, everything else in its natural form.
func formatValue(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// checkUTF8 refuses names that are not valid UTF-8 as RabbitMQ does, for
// every short string of a method without content: 501 FRAME_ERROR
// "Malformed UTF-8 in shortstr", a connection error. Definitions are
// stored as JSON text, which cannot carry other bytes: "q\xff" would come
// back from a restart as "q\uFFFD", merged with any queue of that name.
func checkUTF8(names ...string) error {
	for _, n := range names {
		if !utf8.ValidString(n) {
			return amqpwire.Errorf(amqpwire.CodeFrameError, "Malformed UTF-8 in shortstr")
		}
	}
	return nil
}
