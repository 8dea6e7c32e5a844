// Requests parsed by the server instead of by gRPC, so that a malformed message gets a real
// answer. gRPC 1.51's callback API answers a request it cannot parse with UNIMPLEMENTED and
// an empty message (CallbackUnaryHandler hard-codes it), which tells a client "no such
// method" when the truth is "your bytes are not this message". Each unary method is
// registered again with Wire<Request>/Wire<Response>: gRPC's parse of a Wire always
// succeeds and keeps protobuf's verdict, and the handler below answers INVALID_ARGUMENT for
// a bad message and hands a good one to the service's ordinary typed method. (The generated
// SetMessageAllocatorFor_<Method> must then not be used: it assumes the generated handler.)
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gatescope {

// A protobuf message as it crosses the wire, with whether it parsed.
template <typename Message>
struct Wire {
  Message message;
  bool parsed = false;
};

}  // namespace gatescope

namespace grpc {

// (Wire is not a protobuf message, so protobuf's own SerializationTraits does not apply.)
template <typename Message>
class SerializationTraits<gatescope::Wire<Message>, void> {
 public:
  static Status Serialize(const gatescope::Wire<Message>& wire, ByteBuffer* buffer,
                          bool* own_buffer) {
    return SerializationTraits<Message>::Serialize(wire.message, buffer, own_buffer);
  }
  // Always OK: the outcome is kept in wire->parsed for the handler to answer.
  static Status Deserialize(ByteBuffer* buffer, gatescope::Wire<Message>* wire) {
    wire->parsed = buffer != nullptr && buffer->Valid() &&
                   SerializationTraits<Message>::Deserialize(buffer, &wire->message).ok();
    return Status::OK;
  }
};

}  // namespace grpc

namespace gatescope {

// The position of `method` in the service `service_full_name` ("inference.GRPCInferenceService"),
// as generated code numbers methods (declaration order). Aborts if there is no such method:
// a programming error, met at start-up.
int MethodIndex(absl::string_view service_full_name, absl::string_view method);

// The answer to a request that did not parse as a `Request`.
template <typename Request>
grpc::Status Unparseable() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("the request is not a valid ", Request::descriptor()->full_name(),
                                   " message (protobuf could not parse it)"));
}

// A callback handler for `Service::*method` (the typed unary method of a generated
// CallbackService) that parses requests itself: a request that is not a valid `Request`
// gets INVALID_ARGUMENT naming the message type, without reaching `method`. `service`
// outlives the handler (gRPC owns the handler; the service owns gRPC's method table).
template <typename Service, typename Request, typename Response>
grpc::internal::MethodHandler* ParsingUnaryHandler(
    Service* service, grpc::ServerUnaryReactor* (Service::*method)(
                          grpc::CallbackServerContext*, const Request*, Response*)) {
  return new grpc::internal::CallbackUnaryHandler<Wire<Request>, Wire<Response>>(
      [service, method](grpc::CallbackServerContext* context, const Wire<Request>* request,
                        Wire<Response>* response) {
        if (!request->parsed) {
          grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
          reactor->Finish(Unparseable<Request>());
          return reactor;
        }
        return (service->*method)(context, &request->message, &response->message);
      });
}

// A server-streaming reactor that only finishes with `status` and deletes itself when done.
template <typename Response>
class RefusingWriter final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RefusingWriter(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// As ParsingUnaryHandler, for a server-streaming method.
template <typename Service, typename Request, typename Response>
grpc::internal::MethodHandler* ParsingServerStreamingHandler(
    Service* service, grpc::ServerWriteReactor<Response>* (Service::*method)(
                          grpc::CallbackServerContext*, const Request*)) {
  return new grpc::internal::CallbackServerStreamingHandler<Wire<Request>, Response>(
      [service, method](grpc::CallbackServerContext* context,
                        const Wire<Request>* request) -> grpc::ServerWriteReactor<Response>* {
        if (!request->parsed) {
          return new RefusingWriter<Response>(Unparseable<Request>());
        }
        return (service->*method)(context, &request->message);
      });
}

}  // namespace gatescope
