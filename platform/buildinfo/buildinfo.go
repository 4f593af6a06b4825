// Package buildinfo says what built the running binary: its version, the
// commit and the Go toolchain. `pin version`, the start log line and the
// pin_build_info gauge all read it (docs/releasing.md, "What a binary says").
package buildinfo

import (
	"context"
	"go/version"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

//go:generate go run ./gen

// Set at link time by make build and the image:
//
//	-X github.com/pinmarket/pin/platform/buildinfo.linkedVersion=$(scripts/version.sh)
//	-X github.com/pinmarket/pin/platform/buildinfo.linkedRevision=$(git rev-parse HEAD)
var linkedVersion, linkedRevision string

// Info is what built the binary.
type Info struct {
	// Version is the release tag (v0.3.0), git describe's form after it
	// (v0.3.0-2-g957ecea), or LastRelease+"+unstamped" when the build
	// carries neither a linked version nor Go's VCS stamp.
	Version string
	// Revision is the commit, or "unknown".
	Revision string
	// GoVersion is the toolchain that compiled the binary (runtime.Version()).
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return infoOf(linkedVersion, linkedRevision, runtime.Version(), bi)
}

// infoOf picks, for each field, the linked value, else what Go stamped from
// the VCS (the tag on a tagged commit, a pseudo-version after it), else the
// committed fallback: GOFLAGS=-buildvcs=false leaves a plain go build with
// no stamp at all.
func infoOf(linkedVersion, linkedRevision, goVersion string, bi *debug.BuildInfo) Info {
	info := Info{Version: linkedVersion, Revision: linkedRevision, GoVersion: goVersion}
	var stampedVersion, stampedRevision string
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			stampedVersion = v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				stampedRevision = s.Value
			}
		}
	}
	if info.Revision == "" {
		info.Revision = stampedRevision
	}
	if info.Version == "" {
		switch {
		case stampedVersion != "":
			info.Version = stampedVersion
		case len(stampedRevision) >= 12:
			info.Version = "dev-" + stampedRevision[:12]
		default:
			info.Version = LastRelease + "+unstamped"
		}
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// Collector is the pin_build_info gauge: value 1, the build in its labels,
// so a dashboard can join any series to the version that produced it.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pin_build_info",
		Help: "Always 1; the labels say which version, commit and Go toolchain built the running binary.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(i.Version, i.Revision, i.GoVersion).Set(1)
	return g
}

// ToolchainOutdated reports whether goVersion (runtime.Version()'s form) is
// older than go.mod's toolchain line. A development toolchain ("devel …")
// is not judged.
func ToolchainOutdated(goVersion string) bool {
	goVersion, _, _ = strings.Cut(goVersion, " ") // "go1.26.11 X:nodwarf5"
	return version.IsValid(goVersion) && version.Compare(goVersion, RequiredToolchain) < 0
}

// WarnIfToolchainOutdated logs at WARN when the binary was built with a Go
// older than go.mod's toolchain line: a plain go build under
// GOTOOLCHAIN=local uses the machine's Go, and misses the standard
// library's security fixes that line was raised for.
func (i Info) WarnIfToolchainOutdated(ctx context.Context, logger *slog.Logger) {
	if ToolchainOutdated(i.GoVersion) {
		logger.WarnContext(ctx, "built with a Go older than go.mod's toolchain line: rebuild with GOTOOLCHAIN=auto (make build)",
			"go_version", i.GoVersion, "required", RequiredToolchain)
	}
}
