// Static files served under one path prefix on the REST port (the browser viewer, whose
// files are compiled into the binary: viewer_assets.h). Contract:
//   GET|HEAD <prefix>          -> 302 to <prefix>/ (and "/" too when `claim_root`)
//   GET|HEAD <prefix>/         -> index.html
//   GET|HEAD <prefix>/<name>   -> that file, or 404; the query string is ignored
//   other methods              -> 405 with Allow: GET, HEAD
// Answers carry the file's Content-Type (from its extension), an ETag (a hash of its bytes)
// with Cache-Control: no-cache, so browsers revalidate and get 304 when If-None-Match
// names the current ETag, X-Content-Type-Options: nosniff, and a Content-Security-Policy
// that lets the page load and call only its own origin (no external network). The files
// hold no model data, so they need no token; the API calls the page makes do.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_server.h"

namespace gatescope {

// One file: its name under the prefix ("main.js", no leading slash) and its bytes, which
// must outlive the StaticSite (the generated assets are static arrays).
struct StaticAsset {
  std::string_view name;
  std::string_view bytes;
};

// "text/javascript; charset=utf-8" etc. by the name's extension; application/octet-stream
// for unknown ones.
std::string_view ContentTypeOf(std::string_view name);

class StaticSite {
 public:
  // `prefix` without a trailing slash, e.g. "/viewer". `claim_root`: "/" redirects here.
  StaticSite(std::string prefix, const std::vector<StaticAsset>& assets, bool claim_root);

  // Whether `target` (a request target, query string allowed) is one of this site's paths.
  bool Owns(std::string_view target) const;

  // The answer to a request (see the contract above); 404 for a target Owns() refuses.
  HttpResponse Serve(const HttpRequest& request) const;

 private:
  struct File {
    std::string_view bytes;
    std::string_view content_type;
    std::string etag;  // quoted, as the header carries it
  };

  const std::string prefix_;
  const bool claim_root_;
  std::map<std::string, File, std::less<>> files_;
};

// The browser viewer, served at /viewer/ (and "/" redirecting there) from the files
// compiled into the binary. Built on first use; thread-safe.
const StaticSite& ViewerSite();

}  // namespace gatescope
