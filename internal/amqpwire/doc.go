// Package amqpwire is the AMQP 0-9-1 wire layer: frames, method codecs, field
// tables, content headers and reply codes. It knows nothing about
// connections, channels, exchanges or queues; the AMQP server builds those on
// top of it.
//
// Reading, on a server connection:
//
//	br := bufio.NewReaderSize(conn, 64<<10)
//	if err := amqpwire.ReadProtocolHeader(br); err != nil {
//		// *ProtocolHeaderError: io.WriteString(conn, amqpwire.ProtocolHeader), then close.
//	}
//	fr := amqpwire.NewFrameReader(br, amqpwire.FrameMinSize) // raise with SetFrameMax after tune-ok
//	var asm amqpwire.Assembler                          // one per channel
//	f, err := fr.ReadFrame()
//	cmd, complete, err := asm.Add(f)                // method + header + body -> Command
//
// Writing: a Writer batches frames into a bufio.Writer; Flush when the
// connection has nothing more to send for now.
//
//	w := amqpwire.NewWriter(conn, 64<<10)
//	w.WriteMethod(ch, &amqpwire.QueueDeclareOK{Queue: "q"})
//	w.WriteContentRaw(ch, &amqpwire.BasicDeliver{...}, rawProperties, body)
//	w.Flush()
//
// Errors: every protocol violation found while decoding is an *Error carrying
// the reply code (501 FRAME_ERROR for malformed frames and arguments, 540
// NOT_IMPLEMENTED for unknown methods, 505 UNEXPECTED_FRAME for out-of-order
// content frames) and whether it is hard; (*Error).CloseMethod gives the
// connection.close or channel.close to send. I/O errors pass through
// unchanged.
//
// The method structs, their codecs, the method registry and the reply-code
// constants are generated from the spec shipped in github.com/rabbitmq/amqp091-go
// by internal/gen into methods_gen.go.
package amqpwire

//go:generate go run ./internal/gen -out methods_gen.go
