package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordFormat renders records per a kcat-style -f format string.
//
//	%k key    %v (or %s) value    %t topic    %p partition    %o offset
//	%T timestamp in ms    %h headers as k=v,k=v    %% a percent sign
//	\n newline    \t tab    \\ backslash
type recordFormat []formatPiece

// formatPiece appends either literal text or one record field.
type formatPiece struct {
	literal string
	field   byte // 0 for literal
}

func parseRecordFormat(s string) (recordFormat, error) {
	var (
		f   recordFormat
		lit strings.Builder
	)
	flushLiteral := func() {
		if lit.Len() > 0 {
			f = append(f, formatPiece{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' {
			lit.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return nil, fmt.Errorf("format %q ends with a lone %c", s, c)
		}
		i++
		next := s[i]
		if c == '\\' {
			switch next {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, fmt.Errorf("format %q: unknown escape \\%c", s, next)
			}
			continue
		}
		switch next {
		case '%':
			lit.WriteByte('%')
		case 'k', 'v', 's', 't', 'p', 'o', 'T', 'h':
			flushLiteral()
			f = append(f, formatPiece{field: next})
		default:
			return nil, fmt.Errorf("format %q: unknown field %%%c (want %%k %%v %%t %%p %%o %%T %%h)", s, next)
		}
	}
	flushLiteral()
	return f, nil
}

// appendRecord appends r rendered by f to dst.
func (f recordFormat) appendRecord(dst []byte, r *kgo.Record) []byte {
	for _, p := range f {
		switch p.field {
		case 0:
			dst = append(dst, p.literal...)
		case 'k':
			dst = append(dst, r.Key...)
		case 'v', 's':
			dst = append(dst, r.Value...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}
