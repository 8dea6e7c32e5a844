#include "server/frontend/grpc/wire_message.h"

#include <google/protobuf/descriptor.h>

#include <cstdlib>
#include <string>

#include "server/common/log.h"

namespace gatescope {

int MethodIndex(absl::string_view service_full_name, absl::string_view method) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          std::string(service_full_name));
  const google::protobuf::MethodDescriptor* found =
      service == nullptr ? nullptr : service->FindMethodByName(std::string(method));
  if (found == nullptr) {
    GS_LOG(ERROR) << "no gRPC method " << service_full_name << "." << method;
    std::abort();
  }
  return found->index();
}

}  // namespace gatescope
