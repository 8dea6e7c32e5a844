#include "server/app/unix_socket_path.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::Status CheckUnixSocketPathFree(const std::string& path) {
  auto refuse = [&path](const std::string& why) {
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", path, ": ", why));
  };
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return refuse("its directory " + dir.string() + " does not exist");
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return refuse(std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) return refuse("the path is taken by a file that is not a socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return refuse("the path is too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return refuse(std::strerror(errno));
  const int connected = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int why = errno;
  close(fd);
  if (connected == 0) return refuse("a server is already listening there");
  if (why == ECONNREFUSED) return absl::OkStatus();  // left behind: gRPC replaces it
  return refuse(std::strerror(why));
}

}  // namespace gatescope
