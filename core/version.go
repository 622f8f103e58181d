package core

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Build describes the gobtl build that runs, from the build information
// the Go toolchain stamps into every binary (runtime/debug.ReadBuildInfo).
type Build struct {
	// Module is gobtl's module path.
	Module string
	// Version is the module's version: a release tag (v0.1.0) when gobtl
	// is a dependency fetched by `go get`, a pseudo-version or "(devel)"
	// when the main module is built from a checkout.
	Version string
	// Revision is the VCS revision the binary was built from, Modified
	// whether the tree had uncommitted changes, and Time the revision's
	// commit time (RFC 3339); all empty when the build had no VCS stamp
	// (go build -buildvcs=false, a test binary).
	Revision string
	Modified bool
	Time     string
	// Go is the toolchain that built the binary.
	Go string
}

const modulePath = "github.com/gobtl/gobtl"

// BuildInfo returns the running binary's gobtl build. A program that
// imports gobtl as a dependency reports gobtl's module version, not its
// own.
func BuildInfo() Build {
	b := Build{Module: modulePath, Version: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = bi.GoVersion
	if bi.Main.Path == modulePath {
		b.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			case "vcs.time":
				b.Time = s.Value
			}
		}
		return b
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			if d.Replace != nil {
				d = d.Replace
			}
			b.Version = d.Version
		}
	}
	return b
}

// String is the build in one line: the version, then the short
// revision with "+dirty" when the tree had changes, unless the version is
// a pseudo-version that names them ("v0.1.0", "(devel) f2a151407a3c+dirty",
// "v0.0.0-20261128051708-3a2ac585fcdd+dirty").
func (b Build) String() string {
	v := b.Version
	if b.Revision == "" {
		return v
	}
	short := fmt.Sprintf("%.12s", b.Revision)
	// A pseudo-version (v0.0.0-20261128051708-3a2ac585fcdd+dirty) names
	// the revision and the dirt already.
	if strings.Contains(v, short) {
		return v
	}
	if b.Modified {
		short += "+dirty"
	}
	return strings.TrimSpace(v + " " + short)
}
