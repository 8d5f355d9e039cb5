package jetstream

import "testing"

func TestSubjectMatching(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"a", "a", true}, {"a", "b", false}, {"a.*", "a.b", true}, {"a.*", "a", false},
		{"a.*", "a.b.c", false}, {"a.>", "a.b.c", true}, {"a.>", "a", false}, {">", "a", true},
		{"*.b", "a.b", true}, {"a.b", "a.b.c", false}, {"a.b.c", "a.b", false},
	} {
		if got := matchSubject(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("matchSubject(%q, %q) = %v", tc.pattern, tc.subject, got)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"a.*", "a.b", true}, {"a.*", "*.b", true}, {"a.>", "a.b.c", true}, {"a.*", "a.b.c", false},
		{"a.b", "a.c", false}, {">", "x.y", true}, {"a", "a.b", false}, {"*.*", "a.>", true},
	} {
		if got := subjectsCollide(tc.a, tc.b); got != tc.want {
			t.Errorf("subjectsCollide(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
	for _, tc := range []struct {
		sub, pattern string
		want         bool
	}{
		{"a.b", "a.*", true}, {"a.*", "a.>", true}, {"a.>", "a.*", false}, {"a.*", "a.*", true},
		{"a.b.c", "a.*", false}, {"$JS.EVENT.x", "$JS.EVENT.>", true}, {"a", ">", true}, {"*", "a", false},
	} {
		if got := subsetMatch(tc.sub, tc.pattern); got != tc.want {
			t.Errorf("subsetMatch(%q, %q) = %v", tc.sub, tc.pattern, got)
		}
	}
}
