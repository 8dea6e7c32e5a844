# Multi-stage image: build with Debian 12's toolchain and libraries, run on a slim image
# holding only the runtime libraries. CPU inference (Debian's LibTorch has no CUDA).
#   docker build -t gatescope .
#   docker run -p 8001:8001 -p 8002:8002 gatescope
FROM debian:12 AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh
COPY . .
RUN rm -rf build && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGATESCOPE_BUILD_TESTS=OFF \
      -DGATESCOPE_WITH_CUDA=OFF && cmake --build build -j"$(nproc)"

FROM debian:12-slim AS runtime
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libtorch1.13 libopenblas0-pthread libgrpc++1.51 libprotobuf32 libabsl20220623 \
      libopencv-imgcodecs406 libopencv-imgproc406 libprometheus-cpp-core1.0 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/server/gatescope-server /src/build/client/gatescope-client /usr/local/bin/
COPY --from=build /src/build/models/ops/libgatescope_ops.so /usr/local/lib/gatescope/
COPY model_repository /models
EXPOSE 8001 8002
USER nobody
ENTRYPOINT ["/usr/local/bin/gatescope-server", "--model_repository=/models", \
            "--ops_library=/usr/local/lib/gatescope/libgatescope_ops.so", "--host=0.0.0.0"]
