package main

import "runtime/debug"

// buildVersion is set at link time: -ldflags "-X main.buildVersion=v1.2.3".
// make build and the image pass `git describe --tags --always --dirty`.
var buildVersion string

func version() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(buildVersion, info)
}

// versionOf picks the version pin reports: the linked one, else the one Go
// stamps from the VCS (the tag on a tagged commit, a pseudo-version after
// it), else the bare commit, else "dev".
func versionOf(linked string, info *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return "dev"
}
