# gatescope server image (CPU inference: Debian's LibTorch has no CUDA). docs/docker.md has
# the numbers, the flags and how to test it (scripts/docker_test.sh).
#   docker build -t REGISTRY/gatescope:TAG .
#   docker run -p 8000:8000 -p 8001:8001 -p 8002:8002 REGISTRY/gatescope:TAG [--flag=value ...]
#
# Two stages. `build` compiles only what the image ships (gatescope-server,
# gatescope-client, gatescope-perf, libgatescope_ops.so; no tests) and writes the list of
# Debian packages that own the shared libraries those files load (ldd, then dpkg -S).
# `runtime` installs exactly those packages and nothing else: no compiler, no -dev
# package, no apt Depends that the binaries never load (Mesa/LLVM, GIS and font data, ...).
# The Dockerfile works with the classic builder and with BuildKit/buildx.

ARG BUILD_BASE=debian:12
ARG RUNTIME_BASE=debian:12

FROM ${BUILD_BASE} AS build
# The build dependencies of scripts/setup.sh minus everything for tests, sanitizers and
# Python. libopenblas0-pthread makes OpenBLAS (not reference BLAS) LibTorch's libblas.so.3,
# so the runtime stage gets it too. (No stage starts with the same instruction as another:
# the classic builder would take one stage's layer as the other's cache and miss below it.)
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      g++ make cmake pkg-config \
      libtorch-dev libopenblas0-pthread \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libopencv-dev libpng-dev libjpeg62-turbo-dev libabsl-dev prometheus-cpp-dev libcli11-dev \
      libboost-dev libssl-dev libjemalloc-dev nlohmann-json3-dev libsentencepiece-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY proto proto
COPY models/ops models/ops
COPY server server
COPY client client
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DGATESCOPE_BUILD_TESTS=OFF \
      -DGATESCOPE_WITH_CUDA=OFF >/tmp/cmake.log \
 && cmake --build /build -j"$(nproc)" \
      --target gatescope-server gatescope-client gatescope-perf gatescope_ops \
      gatescope_sentencepiece
# /stage mirrors the runtime image's files. runtime-packages.txt: one package per line,
# the owners of every library in the ldd closure of the shipped binaries.
RUN set -eu; \
    mkdir -p /stage/usr/local/bin /stage/usr/local/lib/gatescope /stage/usr/local/share/gatescope; \
    install -m 0755 -s /build/server/gatescope-server /build/client/gatescope-client \
      /build/client/gatescope-perf /stage/usr/local/bin/; \
    install -m 0644 -s /build/models/ops/libgatescope_ops.so \
      /build/server/libgatescope_sentencepiece.so /stage/usr/local/lib/gatescope/; \
    files="/stage/usr/local/bin/* /stage/usr/local/lib/gatescope/*.so"; \
    if ldd $files | grep 'not found'; then exit 1; fi; \
    ldd $files | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u > /tmp/libs; \
    while read -r lib; do \
      for p in "$lib" "$(readlink -f "$lib")"; do \
        printf '%s %s\n' "$lib" "$p" "$lib" "/usr${p}" "$lib" "${p#/usr}"; \
      done; \
    done < /tmp/libs > /tmp/candidates; \
    cut -d' ' -f2 /tmp/candidates | sort -u | xargs dpkg -S 2>/dev/null | grep -v '^diversion' \
      > /tmp/owned || true; \
    awk 'NR == FNR { i = index($0, ": "); owner[substr($0, i + 2)] = substr($0, 1, i - 1); next } \
         { lib[$1] = 1 } \
         $2 in owner { split(owner[$2], o, ":"); pkg[$1] = o[1] } \
         END { for (l in lib) if (!(l in pkg)) { print "no Debian package owns " l > "/dev/stderr"; bad = 1 } \
               for (l in pkg) print pkg[l]; exit bad }' /tmp/owned /tmp/candidates > /tmp/owners; \
    sort -u /tmp/owners > /stage/usr/local/share/gatescope/runtime-packages.txt; \
    echo "runtime packages: $(wc -l < /stage/usr/local/share/gatescope/runtime-packages.txt)"

FROM ${RUNTIME_BASE} AS runtime
COPY --from=build /stage/usr/local/share/gatescope/runtime-packages.txt /usr/local/share/gatescope/
# Installs the listed packages that the base lacks with dpkg, so apt adds none of their
# Depends (the binaries load none of those). dpkg's database keeps every installed package
# and version (scanners see them), and records those Depends as unmet: an image built
# FROM this one runs `apt-get -f install` before installing anything with apt.
# Documentation and translations are not unpacked (copyright files are).
RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
      'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
      'path-exclude=/usr/share/locale/*' 'path-exclude=/usr/share/lintian/*' \
      > /etc/dpkg/dpkg.cfg.d/gatescope-nodoc; \
    missing=""; \
    for p in $(cat /usr/local/share/gatescope/runtime-packages.txt); do \
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing="$missing $p"; \
    done; \
    apt-get update -qq; \
    mkdir -p /tmp/debs; chown _apt /tmp/debs; cd /tmp/debs; \
    apt-get download -qq $missing; \
    dpkg --force-depends -i ./*.deb >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }; \
    cd /; rm -rf /tmp/debs /tmp/dpkg.log /var/lib/apt/lists/* /var/cache/apt/*.bin \
      /var/cache/debconf/*-old /var/lib/dpkg/*-old /var/log/apt /var/log/dpkg.log; \
    groupadd --gid 10001 gatescope; \
    useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gatescope
COPY --from=build /stage/usr/local/bin/ /usr/local/bin/
COPY --from=build /stage/usr/local/lib/gatescope/ /usr/local/lib/gatescope/
# Every library the binaries need is here (fails the build otherwise).
RUN ! ldd /usr/local/bin/gatescope-* /usr/local/lib/gatescope/*.so | grep 'not found' \
 && gatescope-server --help >/dev/null && gatescope-client --help >/dev/null \
 && gatescope-perf --help >/dev/null
COPY model_repository /models

USER 10001:10001
WORKDIR /tmp
EXPOSE 8000 8001 8002
# SIGTERM (docker stop, Kubernetes) drains: no new calls, queued ones run at once, calls in
# flight get up to --drain_seconds, then the server exits 0.
STOPSIGNAL SIGTERM
# Flags given to `docker run IMAGE ...` (or Kubernetes `args`) come after these and win
# (Abseil takes a flag's last value). --torch_threads=2: explicit, as in the manifests (the
# automatic default, 0, follows the container's CPU quota and affinity and keeps a core for
# gRPC); set it to the container's CPU limit. The server sets OpenBLAS's threads to the
# same number; OPENBLAS_NUM_THREADS keeps its pool that small from the start. The port file lets
# the health check follow --grpc_port.
ENV OPENBLAS_NUM_THREADS=2
ENTRYPOINT ["gatescope-server", "--model_repository=/models", \
            "--ops_library=/usr/local/lib/gatescope/libgatescope_ops.so", \
            "--host=0.0.0.0", "--http_port=8000", "--grpc_port=8001", "--metrics_port=8002", \
            "--torch_threads=2", "--drain_seconds=10", "--port_file=/tmp/gatescope.ports"]
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/bin/sh", "-c", "port=8001; if [ -r /tmp/gatescope.ports ]; then port=$(sed -n 's/^grpc=\\([0-9]*\\).*/\\1/p' /tmp/gatescope.ports); fi; exec gatescope-client health --server 127.0.0.1:${port}"]

# Last, so that new values of these arguments rebuild no layer.
# VERSION: the release (models/pyproject.toml's); REVISION: the commit; SOURCE: the
# repository's URL (none is recorded in the checkout). The project states no licence yet.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=
ARG RUNTIME_BASE
LABEL org.opencontainers.image.title="gatescope" \
      org.opencontainers.image.description="gRPC inference server (gatescope.v1, KServe v2) for TorchScript models with gated and differential attention; CPU" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${RUNTIME_BASE}"
