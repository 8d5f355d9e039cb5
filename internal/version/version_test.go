package version

import "testing"

func TestStringNamesVersionAndCommit(t *testing.T) {
	cases := []struct {
		info Info
		want string
	}{
		{Info{Version: "v0.3.0"}, "v0.3.0"},
		{Info{Version: "(devel)", Commit: "6bf89c5e2a1b3c4d5e6f"}, "(devel)+6bf89c5e2a1b"},
		{Info{Version: "(devel)", Commit: "6bf89c5e2a1b3c4d5e6f", Modified: true}, "(devel)+6bf89c5e2a1b-dirty"},
		// A pseudo-version already carries the commit's first 12 digits.
		{Info{Version: "v0.0.0-20261201000000-6bf89c5e2a1b", Commit: "6bf89c5e2a1b3c4d5e6f"}, "v0.0.0-20261201000000-6bf89c5e2a1b"},
	}
	for _, c := range cases {
		if got := c.info.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.info, got, c.want)
		}
	}
}

func TestReadInATestBinary(t *testing.T) {
	if got := Read().Version; got == "" {
		t.Fatal("Read().Version is empty; want a version or (devel)")
	}
}
