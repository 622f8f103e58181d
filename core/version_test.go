package core

import "testing"

func TestABuildNamesItsRevisionShortAndSaysWhenTheTreeWasDirty(t *testing.T) {
	for _, c := range []struct {
		b    Build
		want string
	}{
		{Build{Version: "v0.1.0"}, "v0.1.0"},
		{Build{Version: "(devel)", Revision: "f2a151407a3c0123456789"}, "(devel) f2a151407a3c"},
		{Build{Version: "(devel)", Revision: "f2a151407a3c0123456789", Modified: true}, "(devel) f2a151407a3c+dirty"},
		{Build{Version: "v0.0.0-20261128051708-f2a151407a3c+dirty", Revision: "f2a151407a3c0123456789", Modified: true}, "v0.0.0-20261128051708-f2a151407a3c+dirty"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}

func TestBuildInfoNamesGobtlsModule(t *testing.T) {
	if b := BuildInfo(); b.Module != "github.com/gobtl/gobtl" || b.Version == "" {
		t.Errorf("BuildInfo() = %+v", b)
	}
}
