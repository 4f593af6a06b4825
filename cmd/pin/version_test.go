package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionPrefersTheTag(t *testing.T) {
	t.Parallel()
	built := func(main string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/pinmarket/pin", Version: main}, Settings: settings}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "957ecea0123456789abcdef"}
	tests := []struct {
		name, linked string
		info         *debug.BuildInfo
		want         string
	}{
		{"git describe linked by make or the image", "v0.3.0-2-g957ecea", built("v0.3.0", rev), "v0.3.0-2-g957ecea"},
		{"go build on a tagged commit", "", built("v0.4.0", rev), "v0.4.0"},
		{"go build after a tag", "", built("v0.4.1-0.20261202120000-957ecea01234+dirty", rev), "v0.4.1-0.20261202120000-957ecea01234+dirty"},
		{"go build without a tag's stamp", "", built("(devel)", rev), "dev-957ecea01234"},
		{"no VCS information", "", built("(devel)"), "dev"},
		{"no build information", "", nil, "dev"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, versionOf(tt.linked, tt.info), tt.name)
	}
}
