# Builds every Flotilla binary into one small runtime image (used by docker-compose.yml).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --workspace --bins \
 && mkdir /out \
 && cp target/release/flotilla target/release/flotilla-hub target/release/flotilla-agent \
       target/release/flotilla-sim target/release/flotilla-load \
       target/release/flotilla-addon-fleet-metrics target/release/flotilla-git-fetch /out/

FROM debian:bookworm-slim
# ca-certificates: the system roots the GitRepo fetch worker (flotilla-git-fetch) trusts for
# https:// repositories, besides a GitRepo's own caBundle.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 flotilla
# The hub runs flotilla-git-fetch from its own directory (--gitops-fetch-worker's default).
COPY --from=build /out/ /usr/local/bin/
COPY examples/ /usr/share/flotilla/examples/
USER flotilla
ENTRYPOINT []
