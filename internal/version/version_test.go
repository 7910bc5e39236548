package version

import (
	"bytes"
	"flag"
	"runtime"
	"strings"
	"testing"
)

func TestUnstampedIsDev(t *testing.T) {
	if got := Version(); got != Dev {
		t.Errorf("Version() = %q unstamped, want %q", got, Dev)
	}
	if Revision() == "" {
		t.Error("Revision() is empty: want the stamp, the toolchain's vcs.revision or unknown")
	}
}

func TestStampedVersion(t *testing.T) {
	version, revision = "v1.2.3", "abc123"
	t.Cleanup(func() { version, revision = "", "" })
	line := String("lodestar-hub")
	for _, want := range []string{"lodestar-hub v1.2.3", "revision abc123", runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(line, want) {
			t.Errorf("String() = %q, want it to contain %q", line, want)
		}
	}
}

func TestFlag(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		print bool
	}{{nil, false}, {[]string{"--version"}, true}, {[]string{"--version=false"}, false}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		f := AddFlag(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if got := f.Print(&out, "x"); got != tc.print || (out.Len() > 0) != tc.print {
			t.Errorf("%v: Print = %v with %q, want %v", tc.args, got, out.String(), tc.print)
		}
	}
}
