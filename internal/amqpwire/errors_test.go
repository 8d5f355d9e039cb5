package amqpwire

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The hard/soft split of the spec's constants, as listed in section 1.2 of
// the 0-9-1 spec.
func TestReplyCodesFromSpec(t *testing.T) {
	soft := map[uint16]string{
		311: "CONTENT_TOO_LARGE", 312: "NO_ROUTE", 313: "NO_CONSUMERS", 403: "ACCESS_REFUSED",
		404: "NOT_FOUND", 405: "RESOURCE_LOCKED", 406: "PRECONDITION_FAILED",
	}
	hard := map[uint16]string{
		320: "CONNECTION_FORCED", 402: "INVALID_PATH", 501: "FRAME_ERROR", 502: "SYNTAX_ERROR",
		503: "COMMAND_INVALID", 504: "CHANNEL_ERROR", 505: "UNEXPECTED_FRAME", 506: "RESOURCE_ERROR",
		530: "NOT_ALLOWED", 540: "NOT_IMPLEMENTED", 541: "INTERNAL_ERROR",
	}
	for code, name := range soft {
		if IsHardError(code) || ReplyCodeName(code) != name {
			t.Errorf("%d: hard=%v name=%q", code, IsHardError(code), ReplyCodeName(code))
		}
	}
	for code, name := range hard {
		if !IsHardError(code) || ReplyCodeName(code) != name {
			t.Errorf("%d: hard=%v name=%q", code, IsHardError(code), ReplyCodeName(code))
		}
	}
	if ReplyCodeName(CodeReplySuccess) != "REPLY_SUCCESS" || IsHardError(200) || ReplyCodeName(999) != "" {
		t.Error("reply-success or unknown code")
	}
	if CodeNotFound != 404 || CodeFrameError != 501 || CodeContentTooLarge != 311 || CodeInternalError != 541 {
		t.Error("constant values")
	}
}

func TestErrorfAndCloseMethod(t *testing.T) {
	e := Errorf(CodeNotFound, "no queue '%s' in vhost '%s'", "q", "/").In(QueueBindID)
	if e.Text != "NOT_FOUND - no queue 'q' in vhost '/'" || e.Hard {
		t.Fatalf("%+v", e)
	}
	if !strings.Contains(e.Error(), "queue.bind") || !strings.Contains(e.Error(), "404") {
		t.Fatalf("Error() = %q", e.Error())
	}
	cc, ok := e.CloseMethod().(*ChannelClose)
	if !ok || cc.ReplyCode != 404 || cc.ReplyText != e.Text || cc.ClassID != 50 || cc.MethodID != 20 {
		t.Fatalf("%+v", e.CloseMethod())
	}

	h := Errorf(CodeCommandInvalid, "second channel.open")
	if !h.Hard {
		t.Fatal("503 should be hard")
	}
	if _, ok := h.CloseMethod().(*ConnectionClose); !ok {
		t.Fatal("hard error should close the connection")
	}
	// A server may override the spec's classification.
	ar := Errorf(CodeAccessRefused, "no access to vhost")
	ar.Hard = true
	if _, ok := ar.CloseMethod().(*ConnectionClose); !ok {
		t.Fatal("override ignored")
	}
}

func TestCloseMethodTruncatesTextOnRuneBoundary(t *testing.T) {
	e := Errorf(CodeNotFound, "%s", strings.Repeat("é", 200)) // 2 bytes a rune
	text := e.CloseMethod().(*ChannelClose).ReplyText
	if len(text) > 255 || !utf8.ValidString(text) || len(text) < 250 {
		t.Fatalf("%d bytes, valid=%v", len(text), utf8.ValidString(text))
	}
	if _, err := e.CloseMethod().Encode(nil); err != nil {
		t.Fatal(err)
	}
}

func TestFrameTooLargeIsBothCodeAndSentinel(t *testing.T) {
	_, _, err := parseFrameHeader([]byte{3, 0, 1, 0, 1, 0, 0}, 4096)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeFrameError || !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("%v", err)
	}
}
