# Build: a static binary, so the final image needs no libc.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sekali ./cmd/sekali

# distroless/static rather than alpine: no shell or package manager to patch,
# yet it has CA certificates and tzdata, and :nonroot runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sekali /usr/local/bin/sekali
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sekali"]
CMD ["serve"]
