package main

import "github.com/pinmarket/pin/platform/buildinfo"

// version is the version pin reports (platform/buildinfo: the linked one,
// else Go's VCS stamp, else the last release marked unstamped).
func version() string { return buildinfo.Read().Version }
