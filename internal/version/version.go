// Package version is the release every Lodestar binary reports: the
// repository's VERSION file, stamped at build time (the Makefile's -X flags),
// and the source revision it was built from.
package version

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Stamped by the linker: -X github.com/lodestar-dev/lodestar/internal/version.version=v0.1.0
// and .revision=<commit>. A plain `go build` leaves them empty.
var (
	version  string
	revision string
)

// Dev is what a binary built without the Makefile's stamps reports.
const Dev = "v0.0.0-dev"

// Version is the release, Dev when the binary was not stamped.
func Version() string {
	if version == "" {
		return Dev
	}
	return version
}

// Revision is the commit the binary was built from: the stamp, else what the
// Go toolchain recorded (vcs.revision, with "-dirty" for a modified tree),
// else "unknown".
func Revision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "unknown" {
		rev += "-dirty"
	}
	return rev
}

// String is the line `<command> --version` prints.
func String(command string) string {
	return fmt.Sprintf("%s %s (revision %s, %s, %s/%s)", command, Version(), Revision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Flag adds --version to fs; Print tells whether it was set and, if so, prints
// the version line to w. Commands call it right after parsing and exit when it
// returns true.
type Flag struct{ set *bool }

// AddFlag registers --version on fs.
func AddFlag(fs *flag.FlagSet) Flag {
	return Flag{set: fs.Bool("version", false, "Print the version and exit.")}
}

// Print prints the version line to w when --version was given, and says whether it did.
func (f Flag) Print(w io.Writer, command string) bool {
	if f.set == nil || !*f.set {
		return false
	}
	_, _ = fmt.Fprintln(w, String(command))
	return true
}
