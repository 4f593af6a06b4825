#!/usr/bin/env bash
# Builds the Go vulnerability database that `make vuln` gives govulncheck, and
# prints its directory. vuln.go.dev is not reachable from every machine that
# builds pin, but the Go module proxy is, and it serves the database's source:
# the OSV entries under data/osv of the golang.org/x/vulndb module. The
# module's own cmd/indexdb turns them into the v1 layout govulncheck reads
# with -db file://... (index/db.json, index/modules.json, ID/*.json).
#
#   scripts/vulndb.sh VERSION   # VERSION of golang.org/x/vulndb, pinned in the Makefile
#
# The result is cached under .cache/vulndb/VERSION: built once per version.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: scripts/vulndb.sh VULNDB_VERSION}
out=.cache/vulndb/$version
if [ -f "$out/index/modules.json" ]; then
  echo "$out"
  exit 0
fi

# Outside the module, so that neither go.mod nor go.sum learns of vulndb;
# the download is still checked against the checksum database.
src=$(cd / && go mod download -json "golang.org/x/vulndb@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ ! -d "$src/data/osv" ]; then
  echo "vulndb.sh: golang.org/x/vulndb@$version has no data/osv" >&2
  exit 1
fi
mkdir -p .cache/vulndb
tmp=$(mktemp -d "$PWD/.cache/vulndb/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "vulndb.sh: indexing $(ls "$src/data/osv" | wc -l) OSV entries of golang.org/x/vulndb@$version" >&2
(cd / && go run "golang.org/x/vulndb/cmd/indexdb@$version" -vulns "$src/data/osv" -out "$tmp/db")
# A concurrent run may have won the race: its copy is as good as ours.
mv -T "$tmp/db" "$out" 2>/dev/null || [ -f "$out/index/modules.json" ]
echo "$out"
