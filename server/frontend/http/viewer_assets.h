// The browser viewer's files (server/frontend/http/viewer/), compiled into the binary: the
// build turns them into viewer_assets.cc (embed_files.cmake), so the server and its image
// need no files on disk to serve the viewer.
#pragma once

#include <vector>

#include "server/frontend/http/static_site.h"

namespace gatescope {

// Every file of the viewer, names relative to viewer/ ("index.html", "main.js", ...).
const std::vector<StaticAsset>& ViewerAssets();

}  // namespace gatescope
