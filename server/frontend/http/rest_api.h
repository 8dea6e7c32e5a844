// The KServe v2 REST API (Open Inference Protocol over HTTP/JSON, Triton's binary tensor
// data and classification extensions) plus the gatescope.v1 calls (protobuf's JSON
// mapping), routed onto the same
// KServeCore and V1Core the gRPC services use, so both protocols answer alike:
//   GET  /v2/health/live | /v2/health/ready            200, or 400 when not ready
//   GET  /v2                                           server metadata
//   GET  /v2/models/M[/versions/V]                     model metadata
//   GET  /v2/models/M[/versions/V]/ready               200, or 400
//   GET  /v2/models/M[/versions/V]/config              Triton model configuration
//   GET  /v2/models[/M[/versions/V]]/stats             statistics
//   POST /v2/models/M[/versions/V]/infer               inference (JSON or binary tensors)
//   POST /v2/models/M[/versions/V]/predict             gatescope.v1 PredictRequest as JSON
//   POST /v2/models/M[/versions/V]/explain             gatescope.v1 ExplainRequest as JSON
//   GET  /v2/models/M[/versions/V]/gatescope           gatescope.v1 model metadata
//   POST /v2/repository/index                          [{name, version, state, reason}]
//   POST /v2/repository/models/M/load | /unload        explicit model control
//   GET  /viewer/...  (and / redirecting there)       the browser viewer's static files
//                                                      (static_site.h; open without a token)
// Errors are {"error": message} with the HTTP status of the gRPC code (400, 401, 403,
// 404, 429, 500, 501, 503, 504). The caller's token is the Authorization header, checked
// per call category as on gRPC.
#pragma once

#include <optional>

#include "server/auth/access_control.h"
#include "server/batching/preparation_pool.h"
#include "server/frontend/core/kserve_core.h"
#include "server/frontend/core/v1_core.h"
#include "server/http/http_server.h"

namespace gatescope {

class RestApi {
 public:
  // POST bodies from this size on are parsed on `pool` rather than on the HTTP thread.
  static constexpr size_t kInlineBodyBytes = 64 << 10;

  // Not owned; all outlive the HTTP server. `access` null: every call allowed. `pool`
  // (may be null: everything on the HTTP thread) parses large bodies; when its queue is
  // full the call gets 429. `viewer`: serve the browser viewer's files (else /viewer/ is
  // an unknown route, 404).
  RestApi(KServeCore* kserve, const V1Core* v1, const AccessControl* access,
          PreparationPool* pool = nullptr, bool viewer = true)
      : kserve_(kserve), v1_(v1), access_(access), pool_(pool), viewer_(viewer) {}

  // The HttpHandler: answers at once, or (inference, explain, model control) from the
  // thread that finishes the call; answers carrying model outputs are written on the pool.
  void Handle(HttpRequest request, HttpRespond respond) const;

  // The HttpServer's check_head: 401 / 403 (as JSON errors) when the caller's token may not
  // call the route's category, before the body is read; nullopt otherwise.
  std::optional<HttpResponse> CheckHead(const HttpRequest& head) const;

 private:
  void RouteSafely(HttpRequest request, const HttpRespond& respond) const;
  void Route(HttpRequest request, const HttpRespond& respond) const;

  KServeCore* const kserve_;
  const V1Core* const v1_;
  const AccessControl* const access_;
  PreparationPool* const pool_;
  const bool viewer_;
};

// The HTTP status answering a gRPC-style code.
http::status HttpStatusOf(absl::StatusCode code);

}  // namespace gatescope
