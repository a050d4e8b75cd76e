# Builds every Flotilla binary into one small runtime image (used by docker-compose.yml).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --workspace --bins \
 && mkdir /out \
 && cp target/release/flotilla target/release/flotilla-hub target/release/flotilla-agent \
       target/release/flotilla-sim target/release/flotilla-load \
       target/release/flotilla-addon-fleet-metrics /out/

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 flotilla
COPY --from=build /out/ /usr/local/bin/
COPY examples/ /usr/share/flotilla/examples/
USER flotilla
ENTRYPOINT []
