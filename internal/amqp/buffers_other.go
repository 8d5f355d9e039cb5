//go:build !linux

package amqp

// Elsewhere connections keep their read buffer while idle.
const canPeek = false

func socketHasInput(uintptr) bool { return true }
