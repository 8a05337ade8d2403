# Herald's Cloud Run image: the functions/cmd/cloudrun server, a static
# binary on distroless, running as a non-root user. HERALD_FUNCTION
# (default all) picks the routes; see docs/configuration.md. Built with
# -tags herald_gcp (HERALD_TAGS, the Makefile's CLOUDRUN_TAGS), it opens
# mem, gcppubsub, rabbit and nats topic URLs and mem, firestore and
# postgres (Cloud SQL) store URLs; for every driver, build with
# --build-arg HERALD_TAGS= (docs/deploy.md).
#
#   docker build -t herald .
#   docker run -p 8080:8080 -e HERALD_TOPIC_URL=mem://h -e HERALD_STORE_URL=mem://h/key \
#     -e HERALD_DEV_TOKEN=a-token-of-16-chars-or-more herald

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETARCH
ARG HERALD_TAGS=herald_gcp
# The version stamp (GET /health's "version"): pass
#   --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) --build-arg DATE=$(date -u +%FT%TZ)
ARG VERSION=devel
ARG COMMIT=
ARG DATE=
RUN CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH:-amd64} \
    go build -tags "${HERALD_TAGS}" -trimpath -ldflags "-s -w -X github.com/heraldevents/herald/internal/version.Version=${VERSION} -X github.com/heraldevents/herald/internal/version.Commit=${COMMIT} -X github.com/heraldevents/herald/internal/version.Date=${DATE}" -o /out/herald ./functions/cmd/cloudrun

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/herald /herald
USER nonroot:nonroot
ENV PORT=8080
EXPOSE 8080
ENTRYPOINT ["/herald"]
