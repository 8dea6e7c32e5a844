#include "server/tasks/classification_explain.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/api/tensor_proto.h"
#include "server/common/status_macros.h"

namespace gatescope {
namespace {

using Params = google::protobuf::Map<std::string, ::inference::InferParameter>;
using Kind = ::inference::InferParameter::ParameterChoiceCase;

// INVALID_ARGUMENT unless the parameter holds the kind of value it is read as.
absl::Status CheckKind(const Params::value_type& p, Kind kind, const char* what) {
  if (p.second.parameter_choice_case() == kind) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(p.first, " parameter must be a ", what));
}

absl::Status ParseKinds(const std::string& list, ExplainOptions& o) {
  for (absl::string_view kind : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    kind = absl::StripAsciiWhitespace(kind);
    if (kind == "rollout") {
      o.rollout = true;
    } else if (kind == "gates") {
      o.gates = true;
    } else if (kind == "resonance") {
      o.resonance = true;
    } else if (kind == "plug_gates") {
      o.plug_gates = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "explain parameter: unknown kind '", std::string(kind),
          "' (rollout, gates, resonance, plug_gates)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseLists(const Params& params, ExplainOptions& o) {
  for (auto [name, list] : {std::pair{"explain_attention_layers", &o.attention_layers},
                            std::pair{"explain_attention_heads", &o.attention_heads},
                            std::pair{"explain_attention_queries", &o.attention_queries}}) {
    auto p = params.find(name);
    if (p == params.end()) continue;
    GS_RETURN_IF_ERROR(CheckKind(*p, ::inference::InferParameter::kStringParam, "string_param"));
    for (absl::string_view item : absl::StrSplit(p->second.string_param(), ',',
                                                 absl::SkipWhitespace())) {
      int value = 0;
      if (!absl::SimpleAtoi(item, &value)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " must be integers"));
      }
      list->push_back(value);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseRolloutOptions(const Params& params, RolloutOptions& r) {
  using P = ::inference::InferParameter;
  if (auto p = params.find("rollout_head_fusion"); p != params.end()) {
    GS_RETURN_IF_ERROR(CheckKind(*p, P::kStringParam, "string_param"));
    r.head_fusion = p->second.string_param();
  }
  if (auto p = params.find("rollout_signed_maps"); p != params.end()) {
    GS_RETURN_IF_ERROR(CheckKind(*p, P::kStringParam, "string_param"));
    r.signed_maps = p->second.string_param();
  }
  if (auto p = params.find("rollout_discard_ratio"); p != params.end()) {
    GS_RETURN_IF_ERROR(CheckKind(*p, P::kDoubleParam, "double_param"));
    r.discard_ratio = p->second.double_param();
  }
  if (auto p = params.find("rollout_start_layer"); p != params.end()) {
    GS_RETURN_IF_ERROR(CheckKind(*p, P::kInt64Param, "int64_param"));
    const int64_t start = p->second.int64_param();
    if (start < 0 || start > (1 << 20)) {
      return absl::InvalidArgumentError("rollout_start_layer out of range");
    }
    r.start_layer = static_cast<int>(start);
  }
  return absl::OkStatus();
}

}  // namespace

MapLayout TokenLayoutOf(const ModelConfig& config) {
  MapLayout layout;
  layout.layers = config.layers();
  layout.heads = config.heads();
  if (config.token_grid_size() == 2 && config.cls_token()) {
    layout.grid_h = config.token_grid(0);
    layout.grid_w = config.token_grid(1);
  }
  layout.has_gate = DeclaresMap(config, "gate");
  layout.has_resonance = DeclaresMap(config, "resonance");
  layout.has_plug_gate = DeclaresMap(config, "plug_gate");
  if (!DeclaresMap(config, "attention")) layout.layers = 0;  // cannot explain
  return layout;
}

ExplainOptions ExplainOptionsOf(const ::gatescope::v1::ExplainRequest& request) {
  ExplainOptions options;
  options.rollout = request.rollout();
  options.gates = request.gates();
  options.resonance = request.resonance();
  options.plug_gates = request.plug_gates();
  options.attention_layers.assign(request.attention_layers().begin(),
                                  request.attention_layers().end());
  options.attention_heads.assign(request.attention_heads().begin(),
                                 request.attention_heads().end());
  options.attention_queries.assign(request.attention_queries().begin(),
                                   request.attention_queries().end());
  const auto& ro = request.rollout_options();
  if (!ro.head_fusion().empty()) options.rollout_options.head_fusion = ro.head_fusion();
  if (!ro.signed_maps().empty()) options.rollout_options.signed_maps = ro.signed_maps();
  options.rollout_options.discard_ratio = ro.discard_ratio();
  options.rollout_options.start_layer = ro.start_layer();
  return options;
}

absl::StatusOr<std::optional<ExplainOptions>> ExplainParameters(
    const ::inference::ModelInferRequest& request) {
  const Params& params = request.parameters();
  auto it = params.find("explain");
  if (it == params.end() && !params.contains("explain_attention_layers")) {
    return std::optional<ExplainOptions>();
  }
  ExplainOptions o;
  if (it != params.end()) {
    GS_RETURN_IF_ERROR(CheckKind(*it, ::inference::InferParameter::kStringParam, "string_param"));
    GS_RETURN_IF_ERROR(ParseKinds(it->second.string_param(), o));
  }
  if (absl::Status st = ParseLists(params, o); !st.ok()) return st;
  if (absl::Status st = ParseRolloutOptions(params, o.rollout_options); !st.ok()) return st;
  if (!o.rollout && !o.gates && !o.resonance && !o.plug_gates && o.attention_layers.empty()) {
    return absl::InvalidArgumentError("explain parameter names no explanation");
  }
  return std::optional<ExplainOptions>(std::move(o));
}

std::vector<std::string> ExplainParameterNames() {
  return {"explain",
          "explain_attention_layers",
          "explain_attention_heads",
          "explain_attention_queries",
          "rollout_head_fusion",
          "rollout_signed_maps",
          "rollout_discard_ratio",
          "rollout_start_layer"};
}

void FillTokenMaps(const TokenMaps& maps, ::gatescope::v1::ExplainResponse* response) {
  if (maps.rollout.defined()) ToFloatProto(maps.rollout, response->mutable_rollout());
  for (const auto& g : maps.gates) ToFloatProto(g, response->add_gates());
  for (const auto& a : maps.attention) ToFloatProto(a, response->add_attention());
  for (const auto& r : maps.resonance) ToFloatProto(r, response->add_resonance());
  if (maps.vigilance.defined()) ToFloatProto(maps.vigilance, response->mutable_vigilance());
  for (const auto& r : maps.attention_resonance) {
    ToFloatProto(r, response->add_attention_resonance());
  }
  for (const auto& g : maps.plug_gates) ToFloatProto(g, response->add_plug_gates());
}

}  // namespace gatescope
