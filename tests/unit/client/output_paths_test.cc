#include "client/output_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gatescope::client {
namespace {

TEST(ClientOutputPathsTest, StemsKeepTheFileNameAndNeverRepeat) {
  OutputPaths paths("/out", /*several_inputs=*/true);
  EXPECT_EQ(paths.Stem("/a/x.png"), "/out/x.png");
  EXPECT_EQ(paths.Stem("/b/x.png"), "/out/x.png.2");
  EXPECT_EQ(paths.Stem("x.png"), "/out/x.png.3");
  EXPECT_EQ(paths.Stem("y.png"), "/out/y.png");
}

TEST(ClientOutputPathsTest, PrefixIsTheDirectoryForOneInput) {
  OutputPaths one("/out", /*several_inputs=*/false);
  EXPECT_EQ(one.Prefix("/a/x.png"), "/out/");
  OutputPaths several("/out", /*several_inputs=*/true);
  EXPECT_EQ(several.Prefix("/a/x.png"), "/out/x.png.");
  EXPECT_EQ(several.Prefix("/b/x.png"), "/out/x.png.2.");
}

TEST(ClientOutputPathsTest, MakeOutDirCreatesParentsAndRefusesAFile) {
  const auto root = std::filesystem::path(testing::TempDir()) / "client_output_paths_test";
  std::filesystem::remove_all(root);
  EXPECT_TRUE(MakeOutDir((root / "a" / "b").string()).ok());
  EXPECT_TRUE(std::filesystem::is_directory(root / "a" / "b"));
  EXPECT_TRUE(MakeOutDir((root / "a" / "b").string()).ok());  // already there
  std::ofstream((root / "file").string()) << "x";
  const absl::Status st = MakeOutDir((root / "file").string());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("cannot create the output directory"),
            std::string::npos);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gatescope::client
