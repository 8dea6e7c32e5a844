#include "server/frontend/http/static_site.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/frontend/http/viewer_assets.h"

namespace gatescope {
namespace {

// Only this origin: scripts, styles, fetches; images also from blob: and data: URLs (the
// picked file's preview). No inline script; styles set through the CSSOM only.
constexpr char kPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// FNV-1a, 64 bits: enough to tell versions of a file apart (not a security property).
std::string EtagOf(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("\"%016x-%x\"", h, bytes.size());
}

std::string_view PathOf(std::string_view target) {
  const size_t query = target.find_first_of("?#");
  return query == std::string_view::npos ? target : target.substr(0, query);
}

HttpResponse Plain(http::status status, unsigned version, std::string body) {
  HttpResponse r{status, version};
  r.set(http::field::content_type, "text/plain; charset=utf-8");
  r.set(http::field::cache_control, "no-store");
  r.set("X-Content-Type-Options", "nosniff");
  r.body() = std::move(body);
  return r;
}

HttpResponse Redirect(const std::string& location, unsigned version) {
  HttpResponse r = Plain(http::status::found, version, absl::StrCat("see ", location, "\n"));
  r.set(http::field::location, location);
  return r;
}

}  // namespace

std::string_view ContentTypeOf(std::string_view name) {
  struct Type {
    std::string_view extension, type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},       {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},         {".svg", "image/svg+xml"},
      {".png", "image/png"},                       {".json", "application/json"},
      {".ico", "image/x-icon"},                    {".txt", "text/plain; charset=utf-8"}};
  for (const Type& t : kTypes) {
    if (name.size() > t.extension.size() &&
        name.substr(name.size() - t.extension.size()) == t.extension) {
      return t.type;
    }
  }
  return "application/octet-stream";
}

StaticSite::StaticSite(std::string prefix, const std::vector<StaticAsset>& assets,
                       bool claim_root)
    : prefix_(std::move(prefix)), claim_root_(claim_root) {
  for (const StaticAsset& a : assets) {
    files_.emplace(std::string(a.name), File{a.bytes, ContentTypeOf(a.name), EtagOf(a.bytes)});
  }
}

bool StaticSite::Owns(std::string_view target) const {
  const std::string_view path = PathOf(target);
  if (claim_root_ && path == "/") return true;
  if (path.substr(0, prefix_.size()) != prefix_) return false;
  return path.size() == prefix_.size() || path[prefix_.size()] == '/';
}

HttpResponse StaticSite::Serve(const HttpRequest& request) const {
  const unsigned version = request.version();
  if (request.method() != http::verb::get && request.method() != http::verb::head) {
    HttpResponse r = Plain(http::status::method_not_allowed, version, "use GET or HEAD\n");
    r.set(http::field::allow, "GET, HEAD");
    return r;
  }
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = PathOf(target);
  if (!Owns(target)) {  // not this site's: answered as an unknown file
    return Plain(http::status::not_found, version,
                 absl::StrCat("no file ", std::string(path), "\n"));
  }
  if (path == "/" || path == prefix_) return Redirect(prefix_ + "/", version);
  std::string_view name = path.substr(prefix_.size() + 1);
  if (name.empty()) name = "index.html";
  const auto it = files_.find(name);
  if (it == files_.end()) {
    return Plain(http::status::not_found, version,
                 absl::StrCat("no file ", std::string(path), "\n"));
  }
  const File& file = it->second;
  const auto presented = request[http::field::if_none_match];
  HttpResponse r{http::status::ok, version};
  r.set(http::field::etag, file.etag);
  r.set(http::field::cache_control, "no-cache");
  // If-None-Match may list several tags; "*" matches any.
  const std::string_view tags(presented.data(), presented.size());
  if (tags == "*" || tags.find(file.etag) != std::string_view::npos) {
    r.result(http::status::not_modified);
    return r;
  }
  r.set(http::field::content_type, std::string(file.content_type));
  r.set("X-Content-Type-Options", "nosniff");
  r.set("Content-Security-Policy", kPolicy);
  r.body().assign(file.bytes.data(), file.bytes.size());
  return r;
}

const StaticSite& ViewerSite() {
  static const StaticSite* const site = new StaticSite("/viewer", ViewerAssets(), true);
  return *site;
}

}  // namespace gatescope
