#include "server/frontend/grpc/authorize.h"

namespace gatescope {

absl::Status Authorize(const grpc::CallbackServerContext& context, const AccessControl* access,
                       Access what) {
  if (access == nullptr) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find("authorization");
  const absl::string_view header =
      found == metadata.end() ? absl::string_view()
                              : absl::string_view(found->second.data(), found->second.size());
  return access->Check(header, what);
}

}  // namespace gatescope
