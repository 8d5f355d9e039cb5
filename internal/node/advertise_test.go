package node

import "testing"

func TestAdvertisedHost(t *testing.T) {
	cases := []struct{ configured, listen, want string }{
		{"", ":9092", "localhost"},
		{"", "0.0.0.0:9092", "localhost"},
		{"", "[::]:9092", "localhost"},
		{"", "127.0.0.1:0", "127.0.0.1"},
		{"", "broker.internal:9092", "broker.internal"},
		{"", "[::1]:9092", "::1"},
		{"kafka.example.com", ":9092", "kafka.example.com"},
		{"kafka.example.com", "127.0.0.1:9092", "kafka.example.com"},
	}
	for _, c := range cases {
		if got := AdvertisedHost(c.configured, c.listen); got != c.want {
			t.Errorf("AdvertisedHost(%q, %q) = %q, want %q", c.configured, c.listen, got, c.want)
		}
	}
}
