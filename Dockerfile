# Builds the pin binary into a small image (used by docker-compose.yml).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/pin ./cmd/pin

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pin /usr/local/bin/pin
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/pin"]
CMD ["serve"]
