# Images for the charts: docker build --target hub -t <registry>/lodestar-hub:<tag> .
# and --target agent. (Not built in CI here: there is no container engine; the
# binaries are the ones `make build` builds and every test runs.)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY api/go.mod api/go.sum ./api/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/lodestar-hub ./cmd/lodestar-hub && \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/lodestar-agent ./cmd/lodestar-agent && \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/lodestar-credentials ./cmd/lodestar-credentials

FROM gcr.io/distroless/static:nonroot AS hub
COPY --from=build /out/lodestar-hub /lodestar-hub
USER 65532:65532
ENTRYPOINT ["/lodestar-hub"]

# The tunnel access provider's credential plugin, for consumers' images:
# COPY --from=<registry>/lodestar-credentials:<tag> /lodestar-credentials /usr/local/bin/
FROM gcr.io/distroless/static:nonroot AS credentials
COPY --from=build /out/lodestar-credentials /lodestar-credentials
USER 65532:65532
ENTRYPOINT ["/lodestar-credentials"]

FROM gcr.io/distroless/static:nonroot AS agent
COPY --from=build /out/lodestar-agent /lodestar-agent
USER 65532:65532
ENTRYPOINT ["/lodestar-agent"]
