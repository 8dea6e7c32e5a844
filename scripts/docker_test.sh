#!/usr/bin/env bash
# Builds the Docker image and tests it end to end (docs/docker.md). Runs as root on Debian 12:
# installs docker.io, debootstrap, python3 and dataset-fashion-mnist when missing, starts
# dockerd (no bridge, no iptables) when none answers, and makes the debian:12 base image
# with debootstrap when there is none (no registry is needed). Every build and container
# uses the host's network; the server listens on free ports of 127.0.0.1.
#
# Checks, each against values: the image's user, contents (no compiler, no -dev package),
# labels and size; gRPC health (server and model) and Docker's HEALTHCHECK; predictions of
# the shipped gatescope-client (docker exec) on Fashion-MNIST test images against their
# labels; explain files (PNG sizes, .npy shapes and values); /metrics from the host
# (request and inference counts equal to the predictions made); and the SIGTERM drain: a
# request held in the batching queue when `docker stop` sends SIGTERM is answered, and the
# server exits 0 after logging the drain.
#
# Usage: scripts/docker_test.sh        (as root)
# Environment: GATESCOPE_IMAGE (tag to build, default gatescope:test), DOCKER_TEST_OUT (a
# directory to keep the explain outputs in), DOCKER_TEST_NO_CACHE=1 (build without the
# layer cache, as on a fresh machine), DOCKER_TEST_NO_BUILD=1 (test the existing image).
# Exit status 0 when every check passed, 1 on the first failure (the reason and the
# server's log on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${GATESCOPE_IMAGE:-gatescope:test}
BASE=debian:12
PY=/usr/bin/python3
MODEL=dgvit_fmnist
FMNIST=/usr/share/datasets/fashion-mnist
NAME=gatescope-test-$$
t_start=$(date +%s)

log() { echo "docker_test: $*"; }
fail() {
  echo "docker_test: FAIL: $*" >&2
  for c in "$NAME" "$NAME-drain"; do
    if docker inspect "$c" >/dev/null 2>&1; then
      echo "--- last lines of $c's log:" >&2
      docker logs --tail 40 "$c" >&2 2>&1 || true
    fi
  done
  exit 1
}

work=$(mktemp -d /tmp/gatescope-docker-test.XXXXXX)
cleanup() {
  for c in "$NAME" "$NAME-drain" "$NAME-client"; do
    docker rm -f "$c" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- tools -------------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || { echo "docker_test: run as root (docker, apt)" >&2; exit 1; }
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
[ -x "$PY" ] || missing+=(python3)
[ -f "$FMNIST/t10k-images-idx3-ubyte.gz" ] || missing+=(dataset-fashion-mnist)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: /tmp/dockerd.log)"
  setsid nohup dockerd --bridge=none --iptables=false </dev/null >/tmp/dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || fail "dockerd did not start (see /tmp/dockerd.log)"
fi

# --- base image ----------------------------------------------------------------------------
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  log "making $BASE with debootstrap (minbase, bookworm)"
  rootfs="$work/rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
  # Like Docker Hub's debian images: no package lists or apt caches in the base.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | docker import - "$BASE" >/dev/null
  rm -rf "$rootfs"
fi

# --- build -------------------------------------------------------------------------------
if [ "${DOCKER_TEST_NO_BUILD:-0}" != 1 ]; then
  old_id=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  log "building $IMAGE (log: streamed below)"
  t0=$(date +%s)
  cache=()
  [ "${DOCKER_TEST_NO_CACHE:-0}" != 1 ] || cache=(--no-cache)
  docker build --network host "${cache[@]}" --build-arg REVISION="$revision" -t "$IMAGE" . 2>&1 \
    | tee "$work/build.log" || fail "docker build failed"
  build_s=$(( $(date +%s) - t0 ))
  new_id=$(docker image inspect --format '{{.Id}}' "$IMAGE")
  # The image this tag named before, when nothing else uses it.
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then docker rmi "$old_id" >/dev/null 2>&1 || true; fi
  log "build time: ${build_s} s"
fi
size=$(docker image inspect --format '{{.Size}}' "$IMAGE") || fail "no image $IMAGE"
log "image size: $size bytes ($(( size / 1000000 )) MB)"

# --- the image itself --------------------------------------------------------------------
[ "$(docker image inspect --format '{{.Config.User}}' "$IMAGE")" = "10001:10001" ] \
  || fail "the image's user is not 10001:10001"
for label in title description version revision; do
  v=$(docker image inspect --format "{{index .Config.Labels \"org.opencontainers.image.$label\"}}" "$IMAGE")
  [ -n "$v" ] || fail "label org.opencontainers.image.$label is missing"
done
[ "$(docker image inspect --format '{{json .Config.Healthcheck.Test}}' "$IMAGE")" != null ] \
  || fail "the image has no HEALTHCHECK"
contents=$(docker run --rm --network host --entrypoint /bin/sh "$IMAGE" -c '
  id -u; id -g
  for t in gcc g++ cc c++ cmake make ld as protoc; do command -v "$t" || true; done
  dpkg-query -W -f "\${Package}\n" | grep -E -- "-dev$" || true
  for b in gatescope-server gatescope-client gatescope-perf; do command -v "$b"; done
  ls /usr/local/lib/gatescope/libgatescope_ops.so /models') || fail "cannot run a shell in $IMAGE"
expected="10001
10001
/usr/local/bin/gatescope-server
/usr/local/bin/gatescope-client
/usr/local/bin/gatescope-perf"
[ "$(head -n 5 <<<"$contents")" = "$expected" ] \
  || fail "image contents: want uid/gid 10001, no build tools or -dev packages, the three binaries on PATH; got:
$contents"
grep -qx "$MODEL" <<<"$contents" || fail "/models lacks $MODEL"
log "image: user 10001:10001, labels, HEALTHCHECK, no build tools or -dev packages, binaries on PATH, /models"

# --- inputs: Fashion-MNIST test images with their labels ---------------------------------
mkdir -p "$work/in" "$work/out"
chmod 0755 "$work" "$work/in"
chmod 0777 "$work/out"   # written by the container's user 10001
"$PY" - "$FMNIST" "$work/in" <<'EOF'
import gzip, struct, sys, zlib
src, out = sys.argv[1], sys.argv[2]
names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
images = gzip.open(f"{src}/t10k-images-idx3-ubyte.gz").read()
labels = gzip.open(f"{src}/t10k-labels-idx1-ubyte.gz").read()
assert struct.unpack(">II", images[:8]) == (2051, 10000) and labels[:4] == b"\0\0\x08\x01"

def png(pixels, w, h):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    rows = b"".join(b"\0" + pixels[y * w:(y + 1) * w] for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))

with open(f"{out}/labels.csv", "w") as csv:
    for i in range(8):   # the first eight test images
        label = labels[8 + i]
        name = f"{i:05d}.png"
        open(f"{out}/{name}", "wb").write(png(images[16 + 784 * i:16 + 784 * (i + 1)], 28, 28))
        csv.write(f"{name},{names[label]}\n")
# A 64x64 scene for the detector (it takes images from 32 px): test image 0 at (x 20, y 10).
scene = bytearray(64 * 64)
for y in range(28):
    scene[(y + 10) * 64 + 20:(y + 10) * 64 + 48] = images[16 + 28 * y:16 + 28 * (y + 1)]
open(f"{out}/scene.png", "wb").write(png(bytes(scene), 64, 64))
EOF
grep -q '^00000.png,Ankle boot$' "$work/in/labels.csv" || fail "Fashion-MNIST test image 0 is not an ankle boot"
chmod 0644 "$work/in"/*
mapfile -t inputs < <(cut -d, -f1 "$work/in/labels.csv" | sed 's|^|/data/in/|')
n_models=$(find model_repository -mindepth 1 -maxdepth 1 -type d | wc -l)

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
metrics() { "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "http://127.0.0.1:$1/metrics"; }
# metric_value PORT NAME LABEL=VALUE...: the value of the one series with those labels.
metric_value() {
  local port=$1; shift
  { metrics "$port" 2>/dev/null || true; } | "$PY" -c '
import re, sys
name, want = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
for line in sys.stdin:
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line.strip())
    if m and m.group(1) == name:
        labels = dict(re.findall(r"(\w+)=\"((?:[^\"\\]|\\.)*)\"", m.group(2) or ""))
        if all(labels.get(k) == v for k, v in want.items()):
            print(float(m.group(3))); sys.exit(0)
print("absent")' "$@"
}

# start_server NAME GRPC METRICS [FLAGS...]: runs the image, waits until it is SERVING.
start_server() {
  local c=$1 grpc=$2 metrics_port=$3; shift 3
  docker run -d --name "$c" --network host --health-interval 2s --health-start-period 120s \
    -v "$work/in:/data/in:ro" -v "$work/out:/data/out" \
    "$IMAGE" --host=127.0.0.1 --grpc_port="$grpc" --metrics_port="$metrics_port" --http_port=0 "$@" >/dev/null \
    || fail "docker run failed"
  local t0 deadline
  t0=$(date +%s)
  deadline=$(( t0 + 180 ))
  until docker exec "$c" gatescope-client health --server "127.0.0.1:$grpc" >/dev/null 2>&1; do
    [ "$(docker inspect --format '{{.State.Running}}' "$c")" = true ] \
      || fail "$c exited with $(docker inspect --format '{{.State.ExitCode}}' "$c") before serving"
    [ "$(date +%s)" -lt "$deadline" ] || fail "$c not SERVING after 180 s"
    sleep 1
  done
  log "$c SERVING on 127.0.0.1:$grpc (metrics :$metrics_port) after $(( $(date +%s) - t0 )) s"
}

# --- serving -----------------------------------------------------------------------------
grpc=$(free_port); metrics_port=$(free_port)
while [ "$metrics_port" = "$grpc" ]; do metrics_port=$(free_port); done
start_server "$NAME" "$grpc" "$metrics_port"
grep -q "serving gRPC on 127.0.0.1:$grpc" <<<"$(docker logs "$NAME" 2>&1)" \
  || fail "the server does not log serving on 127.0.0.1:$grpc (flags after the image's must win)"

# gRPC health: the server and the model.
out=$(docker exec "$NAME" gatescope-client health --server "127.0.0.1:$grpc") || fail "health: $out"
[ "$out" = '{"service":"","status":"SERVING"}' ] || fail "health of the server: $out"
out=$(docker exec "$NAME" gatescope-client health --server "127.0.0.1:$grpc" --service "$MODEL") \
  || fail "health of $MODEL: $out"
[ "$out" = "{\"service\":\"$MODEL\",\"status\":\"SERVING\"}" ] || fail "health of $MODEL: $out"
# Docker's HEALTHCHECK (the image's command; only its interval is shortened here).
for _ in $(seq 60); do
  status=$(docker inspect --format '{{.State.Health.Status}}' "$NAME")
  [ "$status" = healthy ] && break
  sleep 1
done
[ "$status" = healthy ] || fail "Docker health status is '$status', not healthy"
log "health: server and $MODEL SERVING; Docker HEALTHCHECK healthy"

# Every shipped model is loaded and ready (the op library works in the image).
ready=$(docker exec "$NAME" gatescope-client models --server "127.0.0.1:$grpc" | grep -c '"ready":true' || true)
[ "$ready" = "$n_models" ] || fail "$ready of the $n_models shipped models are ready"
log "models: all $n_models shipped models ready"

# Predictions: the label of every image.
before=$(metric_value "$metrics_port" gatescope_requests_total model="$MODEL" kind=predict code=OK)
docker exec "$NAME" gatescope-client predict --server "127.0.0.1:$grpc" --model "$MODEL" \
  --top-k 3 "${inputs[@]}" >"$work/predict.jsonl" || fail "predict failed: $(cat "$work/predict.jsonl")"
"$PY" - "$work/predict.jsonl" "$work/in/labels.csv" <<'EOF' || fail "predictions are wrong"
import json, sys
want = dict(line.strip().split(",", 1) for line in open(sys.argv[2]))
got = [json.loads(line) for line in open(sys.argv[1])]
assert len(got) == len(want), f"{len(got)} results for {len(want)} inputs"
for r in got:
    name = r["file"].rsplit("/", 1)[-1]
    assert r["label"] == want[name], f"{name}: predicted {r['label']!r}, labelled {want[name]!r}"
    assert 0.5 < r["score"] <= 1 and len(r["topk"]) == 3, r
    print(f"  {name}: {r['label']} ({r['score']:.3f})")
EOF
n=${#inputs[@]}
log "predict: all $n labels right"

# /metrics from the host: exactly these requests were counted.
after=$(metric_value "$metrics_port" gatescope_requests_total model="$MODEL" kind=predict code=OK)
"$PY" -c 'import sys; b = 0 if sys.argv[1] == "absent" else float(sys.argv[1]); sys.exit(float(sys.argv[2]) - b != int(sys.argv[3]))' \
  "$before" "$after" "$n" || fail "gatescope_requests_total{model=$MODEL,code=OK}: $before before, $after after $n predictions"
v=$(metric_value "$metrics_port" gatescope_inferences_total model="$MODEL")
[ "$v" = "$n.0" ] || fail "gatescope_inferences_total{model=$MODEL} = $v, want $n"
v=$(metric_value "$metrics_port" gatescope_model_ready model="$MODEL")
[ "$v" = 1.0 ] || fail "gatescope_model_ready{model=$MODEL} = $v, want 1"
v=$(metric_value "$metrics_port" gatescope_request_duration_seconds_count model="$MODEL" kind=predict)
[ "$v" = "$n.0" ] || fail "gatescope_request_duration_seconds_count{model=$MODEL,kind=predict} = $v, want $n"
v=$(metric_value "$metrics_port" gatescope_process_resident_memory_bytes)
"$PY" -c 'import sys; sys.exit(not float(sys.argv[1]) > 1e7)' "$v" 2>/dev/null \
  || fail "gatescope_process_resident_memory_bytes = $v"
log "metrics: gatescope_requests_total{model=$MODEL,kind=predict,code=OK} $before -> $after, inferences_total $n, model_ready 1"

# The other tasks: segmentation (a class per pixel) and detection (boxes in the image).
docker exec "$NAME" gatescope-client predict --server "127.0.0.1:$grpc" --model pvt_gdla_colin27 \
  --out /data/out/seg /data/in/00000.png >"$work/seg.json" || fail "segmentation failed: $(cat "$work/seg.json")"
docker exec "$NAME" gatescope-client predict --server "127.0.0.1:$grpc" --model plug_detr_scenes \
  --out /data/out/det /data/in/scene.png >"$work/det.json" || fail "detection failed: $(cat "$work/det.json")"
"$PY" - "$work/seg.json" "$work/det.json" "$work/out" <<'EOF' || fail "segmentation or detection results are wrong"
import json, struct, sys
seg, det, out = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3])
assert (seg["height"], seg["width"]) == (28, 28) and sum(seg["class_pixels"].values()) == 28 * 28, seg
for path, size in ((f"{out}/seg/mask_raw.png", (28, 28)), (f"{out}/det/boxes.png", None)):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert size is None or struct.unpack(">II", data[16:24]) == size, path
assert det["detections"], det
for d in det["detections"]:
    x0, y0, x1, y1 = d["box"]
    assert 0 <= x0 < x1 <= 64 and 0 <= y0 < y1 <= 64 and 0 < d["score"] <= 1, d
EOF
log "segmentation: 28x28 class map of 784 pixels; detection: $("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["detections"]))' "$work/det.json") boxes inside the 64x64 scene"

# Explain: panel and rollout PNGs, .npy maps with their shapes.
docker exec "$NAME" gatescope-client explain --server "127.0.0.1:$grpc" --model "$MODEL" \
  --rollout --gates --layers 3 --out /data/out/explain /data/in/00000.png >"$work/explain.jsonl" \
  || fail "explain failed: $(cat "$work/explain.jsonl")"
"$PY" - "$work/explain.jsonl" "$work/out/explain" <<'EOF' || fail "explain outputs are wrong"
import ast, json, math, os, struct, sys
line = json.loads(open(sys.argv[1]).readline())
out = sys.argv[2]

def png_size(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path}: not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    return h, w

def npy(path):
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY", f"{path}: not .npy"
    n = struct.unpack("<H", data[8:10])[0]
    header = ast.literal_eval(data[10:10 + n].decode())   # numpy writes a Python dict literal
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    count = math.prod(header["shape"])
    values = struct.unpack(f"<{count}f", data[10 + n:10 + n + 4 * count])
    return header["shape"], values

h, w = png_size(line["png"].replace("/data/out/explain", out))
assert (h, w) == (28, 28), ("rollout png", h, w)
h, w = png_size(line["panel"].replace("/data/out/explain", out))
assert (h, w) == (112 + 30, 6 * 112), ("panel: input, rollout, 4 gate tiles", h, w)
top = json.load(open(f"{out}/00000.png.json"))["classes"][0]
assert top["label"] == "Ankle boot", top
shape, rollout = npy(f"{out}/00000.png.rollout.npy")
assert shape == (4, 4), shape
assert all(math.isfinite(v) and v >= 0 for v in rollout) and max(rollout) > 0, rollout
shape, gates = npy(f"{out}/00000.png.gates.npy")
assert shape == (4, 4, 4, 4) and all(math.isfinite(v) for v in gates), shape
shape, att = npy(f"{out}/00000.png.attention.L3.npy")
assert shape == (4, 17, 17), shape
assert all(math.isfinite(v) for v in att) and any(v != 0 for v in att)
files = sorted(os.listdir(out))
print("  " + " ".join(f"{f} ({os.path.getsize(os.path.join(out, f))} B)" for f in files))
EOF
if [ -n "${DOCKER_TEST_OUT:-}" ]; then
  mkdir -p "$DOCKER_TEST_OUT" && cp -r "$work/out/explain" "$DOCKER_TEST_OUT/"
  log "explain outputs kept in $DOCKER_TEST_OUT/explain"
fi
log "explain: rollout and panel PNGs, rollout [4,4], gates [4,4,4,4], attention L3 [4,17,17]"

docker stop -t 30 "$NAME" >/dev/null
code=$(docker inspect --format '{{.State.ExitCode}}' "$NAME")
[ "$code" = 0 ] || fail "$NAME exited with $code after docker stop"
docker rm "$NAME" >/dev/null

# --- SIGTERM drain -----------------------------------------------------------------------
# A server whose batching delay is 60 s holds a lone request in its queue; `docker stop`
# (SIGTERM) must run it at once and answer it, then exit 0. The shipped model's config.pbtxt
# sets its own (short) delay, which wins over --max_queue_delay_us: this server gets a
# repository whose copy of the model says 60 s.
mkdir -p "$work/in/drain_repo"
cp -R "model_repository/$MODEL" "$work/in/drain_repo/"
printf 'max_batch_size: 16\ndynamic_batching { max_queue_delay_microseconds: 60000000 }\n' \
  >"$work/in/drain_repo/$MODEL/config.pbtxt"
chmod -R a+rX "$work/in/drain_repo"
grpc=$(free_port); metrics_port=$(free_port)
while [ "$metrics_port" = "$grpc" ]; do metrics_port=$(free_port); done
start_server "$NAME-drain" "$grpc" "$metrics_port" --model_repository=/data/in/drain_repo \
  --drain_seconds=30
t_req=$(date +%s)
docker run --rm --name "$NAME-client" --network host -v "$work/in:/data/in:ro" \
  --entrypoint gatescope-client "$IMAGE" predict --server "127.0.0.1:$grpc" --model "$MODEL" \
  --timeout-ms 120000 /data/in/00000.png >"$work/drain.jsonl" 2>&1 &
client_pid=$!
for _ in $(seq 60); do
  pending=$(metric_value "$metrics_port" gatescope_pending_requests model="$MODEL")
  [ "$pending" = 1.0 ] && break
  sleep 0.5
done
[ "$pending" = 1.0 ] || fail "no request waiting in $MODEL's queue (pending: $pending)"
t_term=$(date +%s)
docker stop -t 30 "$NAME-drain" >/dev/null
stop_s=$(( $(date +%s) - t_term ))
wait "$client_pid" || fail "the request in flight at SIGTERM failed: $(cat "$work/drain.jsonl")"
answered_s=$(( $(date +%s) - t_req ))
grep -q '"label":"Ankle boot"' "$work/drain.jsonl" \
  || fail "the request in flight at SIGTERM got: $(cat "$work/drain.jsonl")"
[ "$answered_s" -lt 50 ] || fail "the queued request took ${answered_s} s: the drain did not run it at once"
code=$(docker inspect --format '{{.State.ExitCode}}' "$NAME-drain")
[ "$code" = 0 ] || fail "the server exited with $code after SIGTERM (137: killed after the 30 s grace)"
# (Read whole: `docker logs | grep -q` fails under pipefail when grep stops reading early.)
server_log=$(docker logs "$NAME-drain" 2>&1)
grep -q "signal 15: draining" <<<"$server_log" || fail "no drain in the server's log"
[ "$(tail -n 1 <<<"$server_log")" = "[gatescope INFO] stopped" ] \
  || fail "the server's log does not end with 'stopped'"
tail -n 4 <<<"$server_log" | sed 's/^/  /'
log "drain: the queued request was answered (Ankle boot) after SIGTERM; exit 0 in ${stop_s} s; log: 'signal 15: draining' ... 'stopped'"

log "PASS in $(( $(date +%s) - t_start )) s (image $IMAGE, $size bytes)"
