#!/usr/bin/env bash
# The device validation in one command, run on a machine with an NVIDIA GPU, CUDA (nvcc) and
# a CUDA PyTorch as python3, after scripts/gpu/prepare_carry.sh has written .gpu_carry/ on a
# Debian 12 machine (the server's C++ dependencies, inputs, references, models). Stages
# (run in this order, except that bench runs last, after serve), each bounded in time and
# independent of the others' outcome (a failed stage is reported and the rest still run):
#   facts    the machine: GPU, driver, torch, compilers
#   build    op library + CUDA kernel tests against the device's CUDA LibTorch; the server
#            and gatescope-perf against the same LibTorch and the carried packages
#            (in the background while the op checks run)
#   kernels  the five standalone CUDA kernel tests (ctest -L gpu), and compute-sanitizer over them
#   ops      the Python op tests on CUDA (all five ops, fp32/fp16, masks, odd sizes)
#   bench    op speed against the competitor of the same shape (benchmarks/bench_ops_gpu.py)
#   compat   TorchScript archives from Debian's torch 1.13 in this torch, CPU and CUDA
#   serve    the server with KIND_GPU instances: answers equal the CPU server's; server vs
#            in-process GPU throughput (scripts/gpu/serve_check.py)
#   reuse    instead of build: the binaries an earlier run packed (.gpu_carry/artifacts.tar.xz)
# Writes into $OUT (default ./gpu_out): report.md (summary), log.txt (every stage's output),
# each stage's JSON and artifacts.tar.xz (the binaries built), and exits 1 when a stage
# failed. A stage that would find nothing to check (no device, every test skipped) fails.
# Builds into build-gpu/ (never the CPU build). docs/gpu.md says how to run it.
# Usage: scripts/gpu/gpu_check.sh [STAGE ...] (default: all but reuse). Environment:
# GPU_CHECK_BUDGET_S (seconds; stages that would not fit are skipped), GPU_CHECK_BUILD_DIR,
# GPU_CHECK_CMAKE_ARGS, GPU_CHECK_SERVE_ARGS (e.g. "--perf none"), GPU_CHECK_CXX (the C++
# compiler; default /usr/bin/g++).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu_out}
CARRY=$REPO/.gpu_carry
PREFIX=/tmp/gatescope-sysroot
SYS=$PREFIX/usr
BUILD=${GPU_CHECK_BUILD_DIR:-$REPO/build-gpu}
START=$(date +%s)
BUDGET_S=${GPU_CHECK_BUDGET_S:-540}  # a stage gets at most what is left; under 20 s, none
STAGES=${*:-facts build kernels ops bench compat serve}
for stage in $STAGES; do
  case "$stage" in
    facts | build | reuse | kernels | ops | bench | compat | serve) ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown stage '$stage' (facts build reuse kernels ops bench compat serve)" >&2
       exit 2 ;;
  esac
done
mkdir -p "$OUT"
REPORT=$OUT/report.md
LOG=$OUT/log.txt
: >"$LOG"
echo "# gatescope GPU check $(date -u +%FT%TZ)" >"$REPORT"
export PYTHONUNBUFFERED=1
# The system compiler, not whatever g++ the PATH or the environment's CXX names (the device
# image has set CXX=/opt/gcc/bin/g++, whose op library and server came out with libstdc++
# linked in statically on 2026-11-28): the configuration whose op library and server passed
# (links_shared_libstdcxx). GPU_CHECK_CXX chooses another.
if [ -n "${GPU_CHECK_CXX:-}" ]; then
  export CXX=$GPU_CHECK_CXX CUDAHOSTCXX=$GPU_CHECK_CXX
elif [ -x /usr/bin/g++ ]; then
  export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi

elapsed() { echo $(($(date +%s) - START)); }
note() { echo "$*" | tee -a "$REPORT"; }
wants() { [[ " $STAGES " == *" $1 "* ]]; }

# run NAME SECONDS CMD...: runs CMD with a time limit, its output into the log (and the last
# lines onto stdout); records pass / FAIL (exit code) / skipped in the report.
run() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET_S - $(elapsed)))
  if [ "$left" -lt 20 ]; then note "- $name: skipped (budget spent at $(elapsed) s)"; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0 rc
  t0=$(date +%s)
  echo "===== $name (limit ${limit}s, at $(elapsed)s)" >>"$LOG"
  timeout --kill-after=5 "$limit" "$@" >"$OUT/.stage.$name.log" 2>&1
  rc=$?
  cat "$OUT/.stage.$name.log" >>"$LOG"
  tail -n 15 "$OUT/.stage.$name.log"
  rm -f "$OUT/.stage.$name.log"
  local verdict="pass"
  [ $rc -ne 0 ] && verdict="FAIL (exit $rc$( ((rc == 124 || rc == 137)) && echo ', timed out'))"
  note "- $name: $verdict in $(($(date +%s) - t0)) s"
  return $rc
}

# The carried Debian packages: a prefix that CMake, pkg-config, the compiler and the loader
# are pointed at, leaving the device's own system untouched.
use_sysroot() {
  local libs=$SYS/lib/x86_64-linux-gnu:$PREFIX/lib/x86_64-linux-gnu
  libs=$libs:$SYS/lib/x86_64-linux-gnu/openblas-pthread
  export PATH=$SYS/bin:$PATH
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LIBRARY_PATH=$libs
  export CPATH=$SYS/include:$SYS/include/x86_64-linux-gnu
  export PKG_CONFIG_LIBDIR=$SYS/lib/x86_64-linux-gnu/pkgconfig:$SYS/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX
}

unpack_sysroot() {
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  tar -C "$PREFIX" -xJf "$CARRY/sysroot.tar.xz" || return 1
  # Links that Debian makes absolute point into the prefix instead.
  find "$PREFIX" -type l -lname '/*' | while read -r link; do
    ln -sfn "$PREFIX$(readlink "$link")" "$link"
  done
  # BLAS and LAPACK are Debian alternatives (links dpkg -x does not make): OpenBLAS serves both.
  local ob=$SYS/lib/x86_64-linux-gnu/openblas-pthread
  ln -sf "$ob/libblas.so.3" "$SYS/lib/x86_64-linux-gnu/libblas.so.3"
  ln -sf "$ob/liblapack.so.3" "$SYS/lib/x86_64-linux-gnu/liblapack.so.3"
  # CMake packages check that every library they export exists. Those of packages not
  # carried (OpenCV's other modules, prometheus-cpp's push/pull, ...) get empty stand-ins;
  # nothing links them, and a link that did would fail loudly.
  /usr/bin/env python3 - "$PREFIX" <<'EOF'
import pathlib, re, sys
prefix = pathlib.Path(sys.argv[1])
made = []
for f in prefix.rglob("*.cmake"):
    text = f.read_text(errors="replace")
    for path in re.findall(r'"\$\{_IMPORT_PREFIX\}(/[^"]+)"', text):
        import_prefix = f.parent
        while import_prefix != prefix and not (import_prefix / path.lstrip("/")).parent.exists():
            import_prefix = import_prefix.parent
        target = import_prefix / path.lstrip("/")
        if "/include" in path or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
        made.append(str(target.relative_to(prefix)))
print(f"stand-ins for {len(made)} files not carried: {' '.join(sorted(made)[:40])}")
EOF
}

facts() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cxx11abi', torch.compiled_with_cxx11_abi(), 'device', torch.cuda.get_device_name(0))"
  nvcc --version | tail -2
  g++ --version | head -1
  echo "CXX=${CXX:-unset} CUDAHOSTCXX=${CUDAHOSTCXX:-unset} (the build's compilers)"
  # The compiler the build gets when /usr/bin/g++ is absent, and the binutils the checks use.
  local gxx
  gxx=$(command -v g++)
  echo "g++: $gxx -> $(readlink -f "$gxx")"
  [ "$(head -c 2 "$gxx")" = "#!" ] && { echo "--- $gxx is a script:"; head -c 600 "$gxx"; echo; }
  echo "readelf: $(command -v readelf || echo missing); objdump: $(command -v objdump || echo missing)"
  cmake --version | head -1
  command -v ninja compute-sanitizer ncu
  grep PRETTY_NAME /etc/os-release
  nproc
}

# Python never runs with the carried libraries on its path.
torch_prefix() { env -u LD_LIBRARY_PATH python3 -c "import torch; print(torch.utils.cmake_prefix_path)"; }

# PyTorch's wheels (2.11 too) carry protobuf headers of their own among Torch's include
# directories, which would shadow the carried protobuf that protoc's generated code needs.
# They are moved aside for the build and put back when this script ends.
hide_torch_protobuf() {
  local inc
  inc=$(env -u LD_LIBRARY_PATH python3 -c "import torch.utils.cpp_extension as c; print(c.include_paths()[0])")
  if [ -d "$inc/google/protobuf" ]; then
    mv "$inc/google" "$inc/google.hidden-by-gpu-check" && echo "$inc" >"$OUT/.hidden_torch_google" &&
      echo "moved aside until the end: $inc/google"
  else
    echo "no protobuf headers among Torch's ($inc)"
  fi
}

restore_torch_protobuf() {
  [ -f "$OUT/.hidden_torch_google" ] || return 0
  local inc
  inc=$(cat "$OUT/.hidden_torch_google")
  mv "$inc/google.hidden-by-gpu-check" "$inc/google" && rm -f "$OUT/.hidden_torch_google"
}

# One build tree: the op library and its kernel tests first; the server targets after.
# A configure that fails with the server falls back to the op library alone.
configure() {
  # CUDA graphs ON: a build tree kept from a run that fell back (build_server) has OFF cached.
  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGATESCOPE_WERROR=OFF -DGATESCOPE_CUDA_GRAPHS=ON
                -DGATESCOPE_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER="$(command -v nvcc)"
                -DCMAKE_PREFIX_PATH="$(torch_prefix);$SYS" ${GPU_CHECK_CMAKE_ARGS:-})
  [ -d "$SYS/include" ] || {
    echo "the carried sysroot has no headers: it was prepared for a reuse run (--artifacts)"
    return 1; }
  echo "cmake arguments: ${common[*]}"
  hide_torch_protobuf
  if cmake -S . -B "$BUILD" "${common[@]}" -DGATESCOPE_BUILD_SERVER=ON; then
    echo "configured with the server"
  else
    echo "configure with the server FAILED; op library only"
    rm -rf "$BUILD"  # build-gpu/ or GPU_CHECK_BUILD_DIR: this script's own tree
    cmake -S . -B "$BUILD" "${common[@]}" -DGATESCOPE_BUILD_SERVER=OFF || return 1
    return 3
  fi
}

# A binary with a private copy of libstdc++ linked in crashes in a process that has the
# shared one too: the first TORCH_CHECK with a formatted message failed in a locale facet
# (docs/gpu.md; one device build did that, for a cause not established). Such a binary fails
# the build here.
links_shared_libstdcxx() {
  command -v readelf >/dev/null || { echo "readelf is missing: cannot check $1"; return 1; }
  readelf -d "$1" | grep -q 'NEEDED.*libstdc++' || {
    echo "$1 has libstdc++ linked in statically: refused"; return 1; }
}

# The kernel tests only when the kernels stage will run them.
build_ops() {
  local tests=()
  [[ " $STAGES " == *" kernels "* ]] &&
    tests=(dgsa_kernel_test dar_kernel_test gdla_kernel_test ms_deform_kernel_test plug_kernel_test)
  cmake --build "$BUILD" -j "$(nproc)" --target gatescope_ops "${tests[@]}" || return 1
  links_shared_libstdcxx "$BUILD/models/ops/libgatescope_ops.so"
}

# CUDA graph recording (server/runtime/cuda_graphs_cuda.cc) has only been compiled against
# LibTorch 1.13's headers on the CI machines. If that file does not compile against this
# LibTorch, the server is built again without it (-DGATESCOPE_CUDA_GRAPHS=OFF; its GPU
# instances then run eagerly and log why), so that the serve stage still measures: the
# stage fails with exit 4 and log.txt keeps the compiler's errors.
build_server() {
  local jobs=$(($(nproc) - 2)); [ "$jobs" -ge 1 ] || jobs=1
  local targets=(--target gatescope-server gatescope_sentencepiece gatescope-perf)
  local log="$OUT/.server_build.first.log"
  set -o pipefail  # cmake's status through tee
  if ! cmake --build "$BUILD" -j "$jobs" "${targets[@]}" 2>&1 | tee "$log"; then
    # Ninja names the object whose compile failed; its progress lines name every file.
    grep -q '^FAILED: .*cuda_graphs_cuda\.cc\.o' "$log" || return 1
    echo "CUDA graphs did not compile against this LibTorch; building without them"
    grep -A3 ' error: ' "$log" | head -40
    cmake "$BUILD" -DGATESCOPE_CUDA_GRAPHS=OFF >/dev/null || return 1
    cmake --build "$BUILD" -j "$jobs" "${targets[@]}" || return 1
    links_shared_libstdcxx "$BUILD/server/gatescope-server" || return 1
    return 4
  fi
  links_shared_libstdcxx "$BUILD/server/gatescope-server"
}

# Each check fails when it would check nothing: no tests, no device, skipped cases.
kernel_tests() {
  local out rc
  out=$(cd "$BUILD" && ctest -L gpu --no-tests=error --output-on-failure -j 5 --timeout 120)
  rc=$?
  echo "$out"
  [ $rc -eq 0 ] || return $rc
  ! grep -q "(Skipped)" <<<"$out" || { echo "kernel tests skipped: no device?"; return 1; }
}

sanitize_kernels() {
  local rc=0 t
  for t in dgsa dar gdla ms_deform plug; do
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/models/ops/${t}_kernel_test" \
      >"$OUT/.san_$t" 2>&1 &
  done
  wait
  for t in dgsa dar gdla ms_deform plug; do
    echo "--- memcheck $t: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/.san_$t" | tr '\n' ' ')"
    grep -q "ERROR SUMMARY: 0 errors" "$OUT/.san_$t" && grep -q "PASSED" "$OUT/.san_$t" &&
      ! grep -q "SKIPPED" "$OUT/.san_$t" || { rc=1; head -40 "$OUT/.san_$t"; }
  done
  rm -f "$OUT"/.san_*
  return $rc
}

op_env() {
  env GATESCOPE_OPS_LIB="$BUILD/models/ops/libgatescope_ops.so" PYTHONPATH="$REPO/models" "$@"
}

have_cuda() { python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; }

op_tests() {
  have_cuda || { echo "no CUDA device visible to torch"; return 1; }
  op_env python3 -m pytest -q -p no:cacheprovider -n 8 models/tests/test_ops_cuda.py \
    models/tests/test_ms_deform_op.py
}

bench() {
  set -o pipefail
  op_env python3 benchmarks/bench_ops_gpu.py --budget-s 60 --json "$OUT/bench_ops.json" |
    tee "$OUT/.bench.txt"
}

compat() {
  set -o pipefail
  op_env python3 scripts/gpu/torchscript_compat.py --ref "$CARRY/torchscript_reference.pt" \
    --repo "$CARRY/models" --devices cpu,cuda --json "$OUT/compat.json" | tee "$OUT/.compat.txt"
}

# The server and gatescope-perf load the carried libraries; Python does not. The servers and
# the in-process runs get the first half of the CPUs, gatescope-perf the second; the
# overhead runs compare the server's defaults with its forward passes on two CPUs of their
# own and one Torch thread (four slowed DGViT there on 2026-11-28), and that again with
# CUDA graphs recorded and replayed (--cuda_graphs; docs/gpu.md, "Serving overhead on the
# GPU"). Each dynamic run is repeated with gatescope-perf's load on one gRPC connection per
# client CPU, since one connection held the rate near 30,000 requests/s on 2026-11-29, and
# once more with 16 images per call, since the request path's cost is per call.
# GPU_CHECK_SERVE_ARGS is passed last: its --server-cpus, --client-cpus, --connections or
# --images-per-call win, and any --setup in it replaces these setups.
serve() {
  local python_ld=${LD_LIBRARY_PATH:-} n half
  n=$(nproc); half=$((n / 2))
  local cpus=(--server-cpus "0-$((half - 1))" --client-cpus "$half-$((n - 1))"
              --connections "$((n - half))" --images-per-call 16)
  [ "$half" -ge 2 ] || cpus=()
  local setups=(--setup default= --setup "forward_cpus_1_thread=--forward_cpus=0-1;--torch_threads=1"
                --setup "cuda_graphs=--forward_cpus=0-1;--torch_threads=1;--cuda_graphs")
  [[ " ${GPU_CHECK_SERVE_ARGS:-} " =~ \ --setup[=\ ] ]] && setups=()
  use_sysroot
  GATESCOPE_SERVER_LD_LIBRARY_PATH=$LD_LIBRARY_PATH LD_LIBRARY_PATH=$python_ld \
    op_env python3 scripts/gpu/serve_check.py --build "$BUILD" --models "$CARRY/models" \
    --inputs "$CARRY/inputs" --json "$OUT/serve.json" --perf dgvit_fmnist,vit_fmnist \
    "${cpus[@]}" "${setups[@]}" ${GPU_CHECK_SERVE_ARGS:-}
}

# The built binaries go back through $OUT, so that a later run on a fresh machine can
# check more models without building again (.gpu_carry/artifacts.tar.xz, stage `reuse`).
pack_artifacts() {
  (cd "$BUILD" && tar -cJf "$OUT/artifacts.tar.xz" server/gatescope-server \
    server/libgatescope_sentencepiece.so client/gatescope-perf models/ops/libgatescope_ops.so \
    $(ls models/ops/*_kernel_test 2>/dev/null))
}

reuse_artifacts() {
  mkdir -p "$BUILD" && tar -C "$BUILD" -xJf "$CARRY/artifacts.tar.xz"
}

# `run` starts each stage in a fresh bash under `timeout`, which sees these.
export REPO OUT CARRY PREFIX SYS BUILD STAGES
export -f use_sysroot unpack_sysroot facts torch_prefix hide_torch_protobuf configure \
  links_shared_libstdcxx build_ops build_server kernel_tests sanitize_kernels op_env have_cuda \
  op_tests bench compat serve pack_artifacts reuse_artifacts
trap restore_torch_protobuf EXIT

wants facts && run facts 30 bash -c facts
server_pid=""
if wants build; then
  run unpack 60 bash -c unpack_sysroot
  run configure 120 bash -c "use_sysroot; configure"
  configured=$?
  run build-ops 240 bash -c "use_sysroot; build_ops"
  if [ $configured -eq 0 ]; then
    # The server compiles while the op checks run; its log joins the report when it ends.
    left=$((BUDGET_S - $(elapsed))); [ "$left" -gt 0 ] || left=1
    (timeout "$left" bash -c "use_sysroot; build_server" \
       >"$OUT/.server_build.log" 2>&1
     echo $? >"$OUT/.server_build.rc") &
    server_pid=$!
  fi
fi
if wants reuse; then
  run unpack 60 bash -c unpack_sysroot
  run reuse 30 bash -c reuse_artifacts
fi
wants kernels && run kernels 150 bash -c kernel_tests
# compute-sanitizer runs beside the Python op tests (both only check results).
san_pid=""
if wants kernels; then
  run sanitizer 150 bash -c sanitize_kernels >"$OUT/.sanitizer.out" 2>&1 &
  san_pid=$!
fi
wants ops && run ops 200 bash -c op_tests
if [ -n "$san_pid" ]; then wait "$san_pid"; cat "$OUT/.sanitizer.out"; fi
# compat while the server may still be building; the op benchmark (whose kernels were
# measured on 2026-11-27 and have not changed) after serve, which issue 19 needs most.
wants compat && run compat 90 bash -c compat
if [ -n "$server_pid" ]; then
  wait "$server_pid"
  { echo "===== build-server"; cat "$OUT/.server_build.log"; } >>"$LOG"
  tail -n 20 "$OUT/.server_build.log"
  server_rc=$(cat "$OUT/.server_build.rc")
  if [ "$server_rc" -eq 0 ]; then
    note "- build-server: pass at $(elapsed) s"
    run pack 60 bash -c pack_artifacts
  elif [ "$server_rc" -eq 4 ]; then
    note "- build-server: FAIL (exit 4: built without CUDA graphs, cuda_graphs_cuda.cc did not compile; log.txt) at $(elapsed) s"
  else
    note "- build-server: FAIL (exit $server_rc) at $(elapsed) s"
  fi
fi
wants serve && run serve 300 bash -c serve
wants bench && run bench 150 bash -c bench
note "- total: $(elapsed) s"
# The tables, last, so that the end of the output carries them.
{
  echo
  [ -f "$OUT/.bench.txt" ] && grep '^|' "$OUT/.bench.txt"
  [ -f "$OUT/.compat.txt" ] && tail -n 20 "$OUT/.compat.txt"
  [ -f "$OUT/serve.md" ] && cat "$OUT/serve.md"
} >>"$REPORT"
rm -f "$OUT"/.stage.*.log "$OUT"/.server_build.* "$OUT"/.bench.txt "$OUT"/.compat.txt "$OUT"/.sanitizer.out
cat "$REPORT"
! grep -q "^- [a-z-]*: \(FAIL\|skipped\)" "$REPORT"
