// How the explanation maps of one picture share colour scales (gatescope-client --scale).
#pragma once

#include <optional>
#include <string_view>

namespace gatescope::client {

// One scale shared by every map of a kind (so tiles, layers and compared models can be read
// against each other; the default), or each tile its own.
enum class ScaleMode { kShared, kTile };

// "shared" or "tile"; nullopt for anything else.
inline std::optional<ScaleMode> ParseScaleMode(std::string_view name) {
  if (name == "shared") return ScaleMode::kShared;
  if (name == "tile") return ScaleMode::kTile;
  return std::nullopt;
}

inline const char* ScaleModeName(ScaleMode mode) {
  return mode == ScaleMode::kShared ? "shared" : "tile";
}

}  // namespace gatescope::client
