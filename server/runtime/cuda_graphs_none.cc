// CUDA graphs compiled out (-DGATESCOPE_CUDA_GRAPHS=OFF): GPU instances run every forward
// eagerly and say why once.
#include "server/runtime/cuda_graphs.h"

namespace gatescope {

absl::StatusOr<std::unique_ptr<CudaGraphForwards>> MakeCudaGraphForwards(CudaGraphTarget) {
  return absl::UnimplementedError(
      "this server was built without CUDA graphs (-DGATESCOPE_CUDA_GRAPHS=OFF)");
}

}  // namespace gatescope
