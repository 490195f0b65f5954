# The Go version is go.mod's `go` line; loadtest/compose/compose_test.go checks
# that this default agrees with it. Bump both together (or pass
# --build-arg GO_VERSION=… to try another).
ARG GO_VERSION=1.26.8

# Build: static binaries, so the final image needs no libc.
FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sekali ./cmd/sekali
# The health probe of docker-compose.yml's healthchecks (tools/healthcheck):
# the image has no shell, curl or wget, and the binary no probe command.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/healthcheck ./tools/healthcheck

# distroless/static rather than alpine: no shell or package manager to patch,
# yet it has CA certificates and tzdata, and :nonroot runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sekali /usr/local/bin/sekali
COPY --from=build /out/healthcheck /usr/local/bin/healthcheck
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sekali"]
CMD ["serve"]
