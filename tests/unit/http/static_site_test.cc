// The static route over real loopback sockets: content types, 404 for unknown files,
// redirects, HEAD answered with the head only, ETag revalidation (304), 405 for other
// methods; the embedded viewer's files; and through RestApi, the viewer open without a
// token while the API still needs one.
#include "server/frontend/http/static_site.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/auth/access_control.h"
#include "server/frontend/http/rest_api.h"
#include "server/frontend/http/viewer_assets.h"
#include "tests/unit/http/loopback_client.h"

namespace gatescope {
namespace {

using loopback::Connect;
using loopback::ReadResponse;
using loopback::ReadUntil;
using loopback::Send;

constexpr char kScript[] = "export const answer = 42;\n";

const std::vector<StaticAsset>& TestAssets() {
  static const std::vector<StaticAsset> assets = {
      {"index.html", "<!doctype html><title>t</title>"},
      {"app.js", kScript},
      {"style.css", "body { margin: 0 }"},
      {"blob.bin", std::string_view("\0\1\2", 3)}};
  return assets;
}

// A server answering every request from `site` (as RestApi does for the targets it owns).
std::unique_ptr<HttpServer> Serve(const StaticSite& site) {
  return HttpServer::Start("127.0.0.1", 0,
                           [&site](HttpRequest request, HttpRespond respond) {
                             respond(site.Serve(request));
                           })
      .value();
}

std::string Get(int port, const std::string& method, const std::string& target,
                const std::string& headers = "") {
  const int fd = Connect(port);
  Send(fd, absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: t\r\n", headers, "\r\n"));
  // A HEAD answer has no body, whatever its Content-Length says: read its head only.
  std::string r = method == "HEAD" ? ReadUntil(fd, [](const std::string& d) {
    return d.find("\r\n\r\n") != std::string::npos;
  }) : ReadResponse(fd);
  close(fd);
  return r;
}

// The value of header `name` in a response's head ("" when absent).
std::string Header(const std::string& response, const std::string& name) {
  const std::string key = "\r\n" + name + ": ";
  const size_t at = response.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return response.substr(begin, response.find("\r\n", begin) - begin);
}

std::string Body(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

TEST(StaticSite, ContentTypesByExtension) {
  EXPECT_EQ(ContentTypeOf("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("a/b/main.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("viewer.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("logo.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeOf("x.png"), "image/png");
  EXPECT_EQ(ContentTypeOf("js"), "application/octet-stream");  // no extension
  EXPECT_EQ(ContentTypeOf("blob.bin"), "application/octet-stream");
}

TEST(StaticSite, OwnsItsPrefixAndTheRootOnly) {
  const StaticSite site("/viewer", TestAssets(), /*claim_root=*/true);
  for (const char* t : {"/", "/viewer", "/viewer/", "/viewer/app.js", "/viewer?x=1",
                        "/viewer/a/b.js", "/viewer/../v2/models"}) {
    EXPECT_TRUE(site.Owns(t)) << t;
  }
  for (const char* t : {"/viewerx", "/v2/models", "/v2", "/metrics", "//viewer", "/x/viewer/"}) {
    EXPECT_FALSE(site.Owns(t)) << t;
  }
  const StaticSite unrooted("/viewer", TestAssets(), /*claim_root=*/false);
  EXPECT_FALSE(unrooted.Owns("/"));
  // Asked anyway, a target that is not the site's is an unknown file.
  EXPECT_EQ(unrooted.Serve(HttpRequest{http::verb::get, "/", 11}).result(),
            http::status::not_found);
  EXPECT_EQ(site.Serve(HttpRequest{http::verb::get, "/v", 11}).result(), http::status::not_found);
}

TEST(StaticSite, ServesFilesWithTheirTypesAnd404sTheRest) {
  const StaticSite site("/viewer", TestAssets(), true);
  auto server = Serve(site);
  const std::string index = Get(server->port(), "GET", "/viewer/");
  EXPECT_EQ(index.substr(0, 15), "HTTP/1.1 200 OK") << index;
  EXPECT_EQ(Header(index, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(Body(index), "<!doctype html><title>t</title>");
  EXPECT_EQ(Header(index, "Cache-Control"), "no-cache");
  EXPECT_EQ(Header(index, "X-Content-Type-Options"), "nosniff");
  EXPECT_NE(Header(index, "Content-Security-Policy").find("connect-src 'self'"),
            std::string::npos);

  const std::string script = Get(server->port(), "GET", "/viewer/app.js?v=3");
  EXPECT_EQ(Header(script, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(Body(script), kScript);
  EXPECT_EQ(Header(Get(server->port(), "GET", "/viewer/style.css"), "Content-Type"),
            "text/css; charset=utf-8");
  const std::string blob = Get(server->port(), "GET", "/viewer/blob.bin");
  EXPECT_EQ(Body(blob), std::string("\0\1\2", 3));
  EXPECT_EQ(Header(blob, "Content-Length"), "3");

  for (const char* missing : {"/viewer/nope.js", "/viewer/app.js/", "/viewer/APP.JS",
                              "/viewer/../viewer/app.js"}) {
    const std::string r = Get(server->port(), "GET", missing);
    EXPECT_EQ(r.substr(0, 22), "HTTP/1.1 404 Not Found") << missing << "\n" << r;
  }
}

TEST(StaticSite, RedirectsThePrefixAndTheRootToTheIndex) {
  const StaticSite site("/viewer", TestAssets(), true);
  auto server = Serve(site);
  for (const char* target : {"/", "/viewer", "/viewer?model=m"}) {
    const std::string r = Get(server->port(), "GET", target);
    EXPECT_EQ(r.substr(0, 18), "HTTP/1.1 302 Found") << target << "\n" << r;
    EXPECT_EQ(Header(r, "Location"), "/viewer/") << target;
  }
}

TEST(StaticSite, HeadSendsTheHeadOnlyAndKeepsTheConnection) {
  const StaticSite site("/viewer", TestAssets(), true);
  auto server = Serve(site);
  const int fd = Connect(server->port());
  Send(fd, "HEAD /viewer/app.js HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::string head = ReadUntil(fd, [](const std::string& d) {
    return d.find("\r\n\r\n") != std::string::npos;
  });
  EXPECT_EQ(head.substr(0, 15), "HTTP/1.1 200 OK") << head;
  EXPECT_EQ(Header(head, "Content-Length"), std::to_string(sizeof(kScript) - 1));
  EXPECT_EQ(Header(head, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(Body(head), "");
  // Had the body followed the head, this answer would begin with its bytes.
  Send(fd, "GET /viewer/style.css HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::string next = ReadResponse(fd);
  EXPECT_EQ(next.substr(0, 15), "HTTP/1.1 200 OK") << next;
  EXPECT_EQ(Body(next), "body { margin: 0 }");
  close(fd);
  const std::string missing = Get(server->port(), "HEAD", "/viewer/none.css");
  EXPECT_EQ(missing.substr(0, 12), "HTTP/1.1 404");
}

TEST(StaticSite, RevalidatesWithTheEtagAndRefusesOtherMethods) {
  const StaticSite site("/viewer", TestAssets(), true);
  auto server = Serve(site);
  const std::string first = Get(server->port(), "GET", "/viewer/app.js");
  const std::string etag = Header(first, "ETag");
  ASSERT_GE(etag.size(), 3u);
  EXPECT_EQ(etag.front(), '"');
  EXPECT_NE(etag, Header(Get(server->port(), "GET", "/viewer/style.css"), "ETag"));
  const std::string again =
      Get(server->port(), "GET", "/viewer/app.js", "If-None-Match: " + etag + "\r\n");
  EXPECT_EQ(again.substr(0, 25), "HTTP/1.1 304 Not Modified") << again;
  EXPECT_EQ(Body(again), "");
  EXPECT_EQ(Header(again, "ETag"), etag);
  const std::string stale =
      Get(server->port(), "GET", "/viewer/app.js", "If-None-Match: \"old\"\r\n");
  EXPECT_EQ(Body(stale), kScript);

  const std::string post = Get(server->port(), "POST", "/viewer/app.js", "Content-Length: 0\r\n");
  EXPECT_EQ(post.substr(0, 12), "HTTP/1.1 405") << post;
  EXPECT_EQ(Header(post, "Allow"), "GET, HEAD");
}

TEST(StaticSite, TheEmbeddedViewerHasItsPageScriptsAndStyles) {
  auto server = Serve(ViewerSite());
  const std::string index = Get(server->port(), "GET", "/viewer/");
  EXPECT_EQ(Header(index, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(Body(index).find("<script type=\"module\" src=\"main.js\"></script>"),
            std::string::npos);
  // Every embedded file is served with the bytes the build embedded.
  ASSERT_FALSE(ViewerAssets().empty());
  for (const StaticAsset& a : ViewerAssets()) {
    const std::string r = Get(server->port(), "GET", "/viewer/" + std::string(a.name));
    EXPECT_EQ(r.substr(0, 15), "HTTP/1.1 200 OK") << a.name;
    EXPECT_EQ(Header(r, "Content-Type"), ContentTypeOf(a.name)) << a.name;
    EXPECT_EQ(Body(r), a.bytes) << a.name;
  }
  EXPECT_EQ(Header(Get(server->port(), "GET", "/viewer/main.js"), "Content-Type"),
            "text/javascript; charset=utf-8");
  EXPECT_EQ(Header(Get(server->port(), "GET", "/viewer/viewer.css"), "Content-Type"),
            "text/css; charset=utf-8");
}

// A RestApi behind a token (and no cores: every request in these tests is answered by the
// static route or refused on its head) on a loopback HttpServer.
struct TokenRestServer {
  explicit TokenRestServer(bool viewer) {
    const std::string tokens = ::testing::TempDir() + "/static_site_tokens";
    std::ofstream(tokens) << "viewer-test-token-0123456789\n";
    AccessOptions options;
    options.tokens_file = tokens;
    access = *AccessControl::Load(options);
    rest = std::make_unique<RestApi>(nullptr, nullptr, access.get(), nullptr, viewer);
    HttpServerOptions http;
    RestApi* api = rest.get();
    http.check_head = [api](const HttpRequest& head) { return api->CheckHead(head); };
    server = HttpServer::Start("127.0.0.1", 0,
                               [api](HttpRequest request, HttpRespond respond) {
                                 api->Handle(std::move(request), std::move(respond));
                               },
                               http)
                 .value();
  }
  ~TokenRestServer() { server->Stop(); }

  std::unique_ptr<AccessControl> access;
  std::unique_ptr<RestApi> rest;
  std::unique_ptr<HttpServer> server;
};

TEST(StaticSite, RestApiServesTheViewerWithoutATokenButNotTheApi) {
  TokenRestServer rest(/*viewer=*/true);
  HttpServer* server = rest.server.get();
  const std::string page = Get(server->port(), "GET", "/viewer/");
  EXPECT_EQ(page.substr(0, 15), "HTTP/1.1 200 OK") << page;
  EXPECT_EQ(Header(page, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(Header(Get(server->port(), "GET", "/"), "Location"), "/viewer/");
  EXPECT_EQ(Get(server->port(), "HEAD", "/viewer/main.js").substr(0, 15), "HTTP/1.1 200 OK");
  const std::string missing = Get(server->port(), "GET", "/viewer/missing.js");
  EXPECT_EQ(missing.substr(0, 12), "HTTP/1.1 404") << missing;
  // A path that leaves the viewer by "..": still the static route (404), never the API.
  const std::string dotted = Get(server->port(), "GET", "/viewer/../v2/models/m/gatescope");
  EXPECT_EQ(dotted.substr(0, 12), "HTTP/1.1 404") << dotted;
  EXPECT_EQ(Header(dotted, "Content-Type"), "text/plain; charset=utf-8");
  // Only reads are open: a POST to the viewer's path needs the token (its body is never read).
  const std::string post = Get(server->port(), "POST", "/viewer/x");
  EXPECT_EQ(post.substr(0, 12), "HTTP/1.1 401") << post;
  // The API itself: 401 without the token.
  const std::string api = Get(server->port(), "GET", "/v2/models/m/gatescope");
  EXPECT_EQ(api.substr(0, 12), "HTTP/1.1 401") << api;
}

TEST(StaticSite, AServerWithoutTheViewerTreatsItsPathsAsTheApi) {
  TokenRestServer rest(/*viewer=*/false);
  HttpServer* server = rest.server.get();
  // No open door: without the viewer its path needs the token like any other route.
  const std::string page = Get(server->port(), "GET", "/viewer/");
  EXPECT_EQ(page.substr(0, 12), "HTTP/1.1 401") << page;
}

}  // namespace
}  // namespace gatescope
