package main

import (
	"reflect"
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

func TestLineSplitter(t *testing.T) {
	tab := lineSplitter{keySeparator: []byte("\t"), partition: -1}
	colons := lineSplitter{keySeparator: []byte("::"), partition: 2,
		headers: []kgo.RecordHeader{{Key: "source", Value: []byte("cli")}}}
	valuesOnly := lineSplitter{partition: -1}
	cases := []struct {
		split      lineSplitter
		line       string
		key, value string
		nilKey     bool
	}{
		{tab, "plain", "", "plain", true},
		{tab, "k\tv", "k", "v", false},
		{tab, "k\tv\twith tab", "k", "v\twith tab", false},
		{tab, "\tv", "", "v", false},
		{tab, "", "", "", true},
		{colons, "k::v", "k", "v", false},
		{colons, "k\tv", "", "k\tv", true},
		{valuesOnly, "k\tv", "", "k\tv", true},
	}
	for _, c := range cases {
		r := c.split.record([]byte(c.line))
		if (r.Key == nil) != c.nilKey || string(r.Key) != c.key || string(r.Value) != c.value {
			t.Errorf("separator %q, line %q: key %q (nil %v) value %q", c.split.keySeparator, c.line, r.Key, r.Key == nil, r.Value)
		}
		if r.Partition != c.split.partition || len(r.Headers) != len(c.split.headers) {
			t.Errorf("separator %q, line %q: partition %d, headers %v", c.split.keySeparator, c.line, r.Partition, r.Headers)
		}
	}
}

func TestParseHeaders(t *testing.T) {
	headers, err := parseHeaders([]string{"trace=abc", "empty=", "eq=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "empty", Value: []byte{}}, {Key: "eq", Value: []byte("a=b")}}
	if !reflect.DeepEqual(headers, want) {
		t.Errorf("parseHeaders = %q, want %q", headers, want)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if _, err := parseHeaders([]string{bad}); err == nil {
			t.Errorf("parseHeaders(%q): no error", bad)
		}
	}
}
