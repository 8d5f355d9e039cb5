package netserve

import "testing"

func TestFromLoopback(t *testing.T) {
	for remote, want := range map[string]bool{
		"127.0.0.1:5555":          true,
		"127.1.2.3:5555":          true,
		"[::1]:5555":              true,
		"[::ffff:127.0.0.1]:5555": true,
		"10.0.0.1:5555":           false,
		"[fe80::1%eth0]:5555":     false, // a neighbour on the link: the zone must not hide it
		"[fe80::1%25eth0]:5555":   false,
		"[2001:db8::1]:5555":      false,
		"[::ffff:10.0.0.1]:5555":  false,
		"pipe":                    false, // unparsable: fail closed
		"":                        false,
		"localhost:5555":          false, // a name is not an address
	} {
		if got := FromLoopback(remote); got != want {
			t.Errorf("FromLoopback(%q) = %v, want %v", remote, got, want)
		}
	}
}
