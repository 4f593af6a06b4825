package buildinfo

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestTheToolchainRunningTheTestsIsNotOlderThanGoMod makes a plain `go test`
// under GOTOOLCHAIN=local on an unpatched Go fail instead of passing unnoticed.
func TestTheToolchainRunningTheTestsIsNotOlderThanGoMod(t *testing.T) {
	t.Parallel()
	require.False(t, ToolchainOutdated(runtime.Version()),
		"the tests run on %s, older than go.mod's toolchain %s: run them with GOTOOLCHAIN=auto (make test)", runtime.Version(), RequiredToolchain)
}

func TestToolchainOutdated(t *testing.T) {
	t.Parallel()
	for goVersion, want := range map[string]bool{
		"go1.26.8":                  true,
		"go1.25.12":                 true,
		RequiredToolchain:           false,
		RequiredToolchain + " X:y":  false,
		"go1.99.0":                  false,
		"devel go1.27-abcdef Mon …": false,
	} {
		require.Equal(t, want, ToolchainOutdated(goVersion), goVersion)
	}
}

func TestVersionPrefersTheLinkedOneThenTheTag(t *testing.T) {
	t.Parallel()
	built := func(main string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/pinmarket/pin", Version: main}, Settings: settings}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "957ecea0123456789abcdef"}
	tests := []struct {
		name, linkedVersion, linkedRevision string
		bi                                  *debug.BuildInfo
		want                                Info
	}{
		{"make build or the image", "v0.3.0-2-g957ecea", "957ecea01", built("(devel)"), Info{"v0.3.0-2-g957ecea", "957ecea01", "go1.26.11"}},
		{"go build on a tagged commit", "", "", built("v0.4.0", rev), Info{"v0.4.0", rev.Value, "go1.26.11"}},
		{"go build after a tag", "", "", built("v0.4.1-0.20261202120000-957ecea01234+dirty", rev), Info{"v0.4.1-0.20261202120000-957ecea01234+dirty", rev.Value, "go1.26.11"}},
		{"go build without a version stamp", "", "", built("(devel)", rev), Info{"dev-957ecea01234", rev.Value, "go1.26.11"}},
		{"go build with GOFLAGS=-buildvcs=false", "", "", built("(devel)"), Info{LastRelease + "+unstamped", "unknown", "go1.26.11"}},
		{"no build information", "", "", nil, Info{LastRelease + "+unstamped", "unknown", "go1.26.11"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, infoOf(tt.linkedVersion, tt.linkedRevision, "go1.26.11", tt.bi), tt.name)
	}
}

func TestBuildInfoGauge(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(Info{Version: "v0.4.0", Revision: "957ecea", GoVersion: "go1.26.11"}.Collector())
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	require.Equal(t, "pin_build_info", families[0].GetName())
	require.Len(t, families[0].GetMetric(), 1)
	m := families[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"version": "v0.4.0", "revision": "957ecea", "goversion": "go1.26.11"}, labels)
	require.Equal(t, 1.0, m.GetGauge().GetValue())
}

func TestAnOutdatedToolchainIsLoggedAtWarn(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	Info{GoVersion: RequiredToolchain}.WarnIfToolchainOutdated(context.Background(), logger)
	require.Empty(t, logs.String())
	Info{GoVersion: "go1.26.8"}.WarnIfToolchainOutdated(context.Background(), logger)
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "go_version=go1.26.8 required="+RequiredToolchain)
}
