#include "server/app/blas_core.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gatescope {
namespace {

constexpr char kCoreTypeVariable[] = "OPENBLAS_CORETYPE";
constexpr char kDetectedVariable[] = "GATESCOPE_OPENBLAS_DETECTED";

// OpenBLAS's x86 cores whose kernels predate AVX2 (openblas_get_corename()'s spelling, any
// case). A closed list: a core named by a newer OpenBLAS is a newer CPU, left alone.
bool WithoutAvx2Kernels(std::string_view core) {
  static const auto* const kCores = new absl::flat_hash_set<std::string>{
      "unknown", "katmai",  "coppermine", "northwood",     "prescott",  "banias",
      "atom",    "core2",   "penryn",     "dunnington",    "nehalem",   "athlon",
      "opteron", "opteron(sse3)", "barcelona", "nano", "sandybridge", "bobcat",
      "bulldozer", "piledriver", "steamroller"};
  return kCores->contains(absl::AsciiStrToLower(absl::string_view(core.data(), core.size())));
}

// What the re-executed process was told OpenBLAS detected (GATESCOPE_OPENBLAS_DETECTED),
// taken out of the environment by ReexecWithBetterOpenBlasCore so that nothing inherits it;
// written once before any thread of ours starts, read after.
std::string& DetectedBeforeReexec() {
  static auto* const detected = new std::string;
  return *detected;
}

// Whether /proc/self/exe is this program's own file: not so when a wrapper runs it (the
// dynamic loader invoked by hand, valgrind, qemu-user), whose re-execution would not start
// the server. This program's file is the one mapped where this function's code lies
// (/proc/self/maps names its device and inode), whatever argv[0] says: a server found on
// PATH has a bare name there.
bool ExeIsThisProgram() {
  struct stat exe {};
  if (stat("/proc/self/exe", &exe) != 0) return false;
  const auto here = reinterpret_cast<uintptr_t>(&ExeIsThisProgram);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset major:minor inode [path]
    const std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 5) continue;
    const std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(f[0], '-');
    const std::pair<absl::string_view, absl::string_view> dev = absl::StrSplit(f[3], ':');
    uint64_t start = 0, end = 0, major = 0, minor = 0, inode = 0;
    if (!absl::SimpleHexAtoi(range.first, &start) || !absl::SimpleHexAtoi(range.second, &end) ||
        here < start || here >= end) {
      continue;
    }
    return absl::SimpleHexAtoi(dev.first, &major) && absl::SimpleHexAtoi(dev.second, &minor) &&
           absl::SimpleAtoi(f[4], &inode) && inode == exe.st_ino &&
           major == ::major(exe.st_dev) && minor == ::minor(exe.st_dev);
  }
  return false;
}

// The "flags" line of /proc/cpuinfo (its first processor's), or empty.
std::string CpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "flags")) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(colon + 1);
    }
  }
  return "";
}

}  // namespace

std::string BetterOpenBlasCore(std::string_view detected, std::string_view cpu_flags) {
  if (!WithoutAvx2Kernels(detected)) return "";
  const absl::flat_hash_set<absl::string_view> flags = absl::StrSplit(
      absl::string_view(cpu_flags.data(), cpu_flags.size()), absl::ByAnyChar(" \t"),
      absl::SkipEmpty());
  const auto has = [&flags](std::initializer_list<absl::string_view> names) {
    for (absl::string_view name : names) {
      if (!flags.contains(name)) return false;
    }
    return true;
  };
  if (!has({"avx2", "fma"})) return "";
  if (has({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})) {
    return has({"avx512_bf16"}) ? "Cooperlake" : "SkylakeX";
  }
  return "Haswell";
}

std::string OpenBlasCoreName() {
  // Looked up rather than linked: LibTorch links whichever BLAS Debian's alternatives
  // provide, and only OpenBLAS has this function.
  using CoreNameFn = char* (*)();
  const auto core_name =
      reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return "";
  const char* name = core_name();
  return name == nullptr ? "" : std::string(absl::StripAsciiWhitespace(name));
}

void ReexecWithBetterOpenBlasCore(char** argv) {
  if (const char* detected = std::getenv(kDetectedVariable); detected != nullptr) {
    DetectedBeforeReexec() = detected;
    unsetenv(kDetectedVariable);
  }
  if (std::getenv(kCoreTypeVariable) != nullptr) return;
  const std::string detected = OpenBlasCoreName();
  if (detected.empty()) return;
  const std::string better = BetterOpenBlasCore(detected, CpuFlags());
  if (better.empty()) return;
  if (!ExeIsThisProgram()) {
    std::cerr << "gatescope-server: OpenBLAS took this CPU for " << detected
              << "; run under a wrapper, the server cannot re-execute itself with "
              << kCoreTypeVariable << "=" << better << ": set it in the environment\n";
    return;
  }
  if (setenv(kCoreTypeVariable, better.c_str(), 1) != 0 ||
      setenv(kDetectedVariable, detected.c_str(), 1) != 0) {
    return;
  }
  execv("/proc/self/exe", argv);
  // Still here: the re-exec failed; run on OpenBLAS's own choice, and say so.
  std::cerr << "gatescope-server: re-executing with " << kCoreTypeVariable << "=" << better
            << " failed (" << std::strerror(errno) << "); OpenBLAS keeps " << detected << "\n";
  unsetenv(kCoreTypeVariable);
  unsetenv(kDetectedVariable);
}

std::string DescribeBlasCore() {
  const std::string core = OpenBlasCoreName();
  if (core.empty()) return "not OpenBLAS";
  const std::string& detected = DetectedBeforeReexec();
  const char* forced = std::getenv(kCoreTypeVariable);
  if (forced == nullptr) {
    return absl::StrCat("OpenBLAS core ", core, " (OpenBLAS's choice for this CPU)");
  }
  const bool took = absl::EqualsIgnoreCase(core, forced);
  if (!detected.empty()) {
    return took ? absl::StrCat("OpenBLAS core ", core,
                               " (set by gatescope: OpenBLAS took this CPU for ", detected, ")")
                : absl::StrCat("OpenBLAS core ", core, " (gatescope set ", kCoreTypeVariable,
                               "=", forced, ", which this OpenBLAS did not take; it took this ",
                               "CPU for ", detected, ")");
  }
  return absl::StrCat("OpenBLAS core ", core, " (", kCoreTypeVariable, "=", forced,
                      took ? "" : ", which this OpenBLAS did not take", ")");
}

}  // namespace gatescope
