# The production image of pin: `pin serve`, `pin migrate`, `pin kafka create-topics`,
# `pin healthcheck`. Built with -tags production: no test broker, no `pin dev`.
#
#   docker build --build-arg VERSION="$(scripts/version.sh)" --build-arg REVISION="$(git rev-parse HEAD)" -t pin .   # = make image
#
# Base images are pinned by digest (the tag stays for the reader). The digests were taken from
# public Dockerfiles pinning the same tags (the distroless one dated 2026-08-26 there); on
# 2026-12-03 each appeared, for the same tag, in ten public repositories or more. The machines this
# was written on have no registry access, so neither is confirmed against the registry. Refresh and
# check them before a release (docs/releasing.md):
#   crane digest golang:1.26.N-bookworm ; crane digest gcr.io/distroless/static-debian12:nonroot
#
# The Go that compiles pin is go.mod's toolchain line (README, "Go version policy"), not the base
# image's. No digest of a golang:1.26.11 image could be obtained offline, so the base stays the
# go1.26.8 image of the known digest and only bootstraps: GOTOOLCHAIN=auto (the image sets local)
# makes its go command download the toolchain go.mod names from the module proxy, checked against
# the checksum database. Once a digest of golang:<toolchain>-bookworm is verified, pin that instead.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
# The contract is a Go module of its own, which go.mod replaces with its local copy.
COPY modules/promotion/contract/go.mod modules/promotion/contract/go.sum modules/promotion/contract/
# So is the contracts' schema compatibility gate, which the contract's tests require.
COPY platform/schemacompat/go.mod platform/schemacompat/go.sum platform/schemacompat/
# Fetches go.mod's toolchain into a cached layer and prints it in the build log.
RUN go version && go mod download
COPY . .
# The version `pin version` prints and pin_build_info carries; required, so an image never says "dev".
# REVISION is the commit (make image passes git rev-parse HEAD); .git is not in the build context.
ARG VERSION
ARG REVISION=unknown
RUN test -n "$VERSION" || { echo 'build with --build-arg VERSION=$(scripts/version.sh)' >&2; exit 1; }
RUN CGO_ENABLED=0 go build -tags production -trimpath -ldflags "-s -w \
      -X github.com/pinmarket/pin/platform/buildinfo.linkedVersion=${VERSION} \
      -X github.com/pinmarket/pin/platform/buildinfo.linkedRevision=${REVISION}" -o /out/pin ./cmd/pin

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/pin /usr/local/bin/pin
# All interfaces inside the container: the default 127.0.0.1 is unreachable through -p 8080:8080.
ENV PIN_HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
# distroless's "nonroot" user.
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD ["/usr/local/bin/pin", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/pin"]
CMD ["serve"]
