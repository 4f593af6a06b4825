#!/usr/bin/env bash
# Prints the version `make` links into the binary (docs/releasing.md, "What a
# binary says"): `git describe` where the clone has the release tags, and the
# same string without them (a clone made with --no-tags, a fork, a CI
# checkout): the last release recorded in the tree, the commits since the
# commit that released it, and the commit, as v0.3.0-N-g<hash>[-dirty].
# Run from anywhere inside the clone.
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"
if git describe --tags --dirty --match 'v[0-9]*' 2>/dev/null; then
	exit 0
fi

dirty=""
git update-index -q --refresh >/dev/null 2>&1 || true
git diff-index --quiet HEAD -- 2>/dev/null || dirty="-dirty"
fallback() { echo "$(git rev-parse --short HEAD)${dirty}"; }

# The last release, as `go generate ./platform/buildinfo` recorded it from CHANGELOG.md.
release=$(sed -n 's/^const LastRelease = "\(v[0-9][0-9.]*\)"$/\1/p' platform/buildinfo/release.go)
if [[ -z "$release" || "$(git rev-parse --is-shallow-repository)" == true ]]; then
	fallback # a shallow clone cannot count the commits since the release
	exit 0
fi
# The commit that released it: the one CHANGELOG.md's link names (the releases
# drawn up afterwards), else the release commit, the one that wrote the
# version into release.go (docs/releasing.md, step 2).
v=${release#v}
commit=$(sed -n "s#^\[${v//./\\.}\]: .*/\(compare/[^.]*\.\.\.\|tree/\)\([0-9a-f]\{7,40\}\)\$#\2#p" CHANGELOG.md)
if [[ -z "$commit" ]]; then
	commit=$(git log --reverse --format=%H -S"const LastRelease = \"$release\"" -- platform/buildinfo/release.go | head -n 1)
fi
if [[ -z "$commit" ]] || ! git merge-base --is-ancestor "$commit" HEAD 2>/dev/null; then
	fallback
	exit 0
fi
n=$(git rev-list --count "$commit..HEAD")
if [[ "$n" == 0 ]]; then
	echo "${release}${dirty}"
else
	echo "${release}-${n}-g$(git rev-parse --short HEAD)${dirty}"
fi
