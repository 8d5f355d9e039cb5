package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordFormat(t *testing.T) {
	r := &kgo.Record{
		Topic:     "orders",
		Partition: 2,
		Offset:    41,
		Key:       []byte("k"),
		Value:     []byte("v"),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
	}
	cases := map[string]string{
		`%v\n`:                   "v\n",
		`%s`:                     "v",
		`%k=%v\n`:                "k=v\n",
		`%t/%p@%o %T [%h] 100%%`: "orders/2@41 1700000000123 [a=1,b=2] 100%",
		`a\tb\\c`:                "a\tb\\c",
		"literal only":           "literal only",
	}
	for format, want := range cases {
		f, err := parseRecordFormat(format)
		if err != nil {
			t.Errorf("parse %q: %v", format, err)
			continue
		}
		if got := string(f.appendRecord(nil, r)); got != want {
			t.Errorf("format %q = %q, want %q", format, got, want)
		}
	}
}

func TestRecordFormatNullKeyAndNoHeaders(t *testing.T) {
	f, err := parseRecordFormat(`[%k][%h]`)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.appendRecord(nil, &kgo.Record{Value: []byte("x")})); got != "[][]" {
		t.Errorf("got %q", got)
	}
}

func TestRecordFormatRejectsUnknown(t *testing.T) {
	for _, bad := range []string{`%x`, `50%`, `\q`, `ends\`} {
		if _, err := parseRecordFormat(bad); err == nil {
			t.Errorf("parseRecordFormat(%q): no error", bad)
		}
	}
}

func TestRecordFromLine(t *testing.T) {
	cases := []struct {
		line       string
		key, value string
		nilKey     bool
	}{
		{"plain", "", "plain", true},
		{"k\tv", "k", "v", false},
		{"k\tv\twith tab", "k", "v\twith tab", false},
		{"\tv", "", "v", false},
		{"", "", "", true},
	}
	for _, c := range cases {
		r := recordFromLine([]byte(c.line))
		if (r.Key == nil) != c.nilKey || string(r.Key) != c.key || string(r.Value) != c.value {
			t.Errorf("line %q: key %q (nil %v) value %q", c.line, r.Key, r.Key == nil, r.Value)
		}
	}
}
