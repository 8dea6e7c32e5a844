#include "client/npy_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gatescope::client {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("npy_writer_test." + std::to_string(getpid()) + "." + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NpyWriterTest, HeaderMatchesNumpySave) {
  // np.save(f, np.zeros((2, 3), '<f4')) writes exactly these 128 header bytes.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(dict.size(), 59u);
  const std::string expected =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(58, ' ') + "\n";
  EXPECT_EQ(NpyHeader({2, 3}), expected);
  EXPECT_EQ(expected.size(), 128u);
}

TEST(NpyWriterTest, OneDimensionalAndScalarShapes) {
  const std::string one = NpyHeader({4});
  EXPECT_NE(one.find("'shape': (4,), }"), std::string::npos);
  const std::string scalar = NpyHeader({});
  EXPECT_NE(scalar.find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(one.size(), 128u);
  EXPECT_EQ(scalar.size(), 128u);
}

TEST(NpyWriterTest, LongHeadersPadToTheNextBlock) {
  // A 128-character dict: 10 + 128 + '\n' bytes round up to 192.
  const std::vector<int64_t> shape = {1000000, 1000000, 1000000, 1000000, 1000000,
                                      1000000, 1000000, 1000000, 7};
  const std::string h = NpyHeader(shape);
  ASSERT_EQ(h.size(), 192u);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_EQ(static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8, 182);
  EXPECT_EQ(h.find("(1000000, 1000000, 1000000, 1000000, 1000000, 1000000, 1000000, "
                   "1000000, 7), }"),
            h.find("'shape': ") + 9);
  EXPECT_EQ(h.find_first_not_of(' ', 10 + 128), h.size() - 1);
}

TEST(NpyWriterTest, DataIsLittleEndianFloat32AfterTheHeader) {
  const std::string file = NpyFile({2, 2}, std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f});
  ASSERT_EQ(file.size(), 128u + 16u);
  const std::string expected_data("\x00\x00\x80\x3f" "\x00\x00\x00\xc0"
                                  "\x00\x00\x00\x3f" "\x00\x00\x40\x40", 16);
  EXPECT_EQ(file.substr(128), expected_data);
  EXPECT_EQ(file.substr(0, 128), NpyHeader({2, 2}));
}

TEST(NpyWriterTest, SizeMismatchWritesNothing) {
  EXPECT_EQ(NpyFile({2, 3}, std::vector<float>(5, 1.0f)), "");
  EXPECT_EQ(NpyFile({-1, 3}, std::string()), "");
  const std::string path = TempPath("mismatch.npy");
  EXPECT_FALSE(WriteNpy(path, {2, 2}, std::string(12, '\0')));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(NpyWriterTest, WrittenFileLoadsInNumpy) {
  const std::string path = TempPath("roundtrip.npy");
  const std::vector<float> values = {0.25f, -1.5f, 3e-8f, 1e30f, 7.0f, -0.0f};
  const std::string bytes = NpyFile({1, 2, 3}, values).substr(128);
  ASSERT_TRUE(WriteNpy(path, {1, 2, 3}, bytes));
  EXPECT_EQ(Slurp(path), NpyFile({1, 2, 3}, values));
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    std::filesystem::remove(path);
    GTEST_SKIP() << "no /usr/bin/python3 with numpy";
  }
  const std::string check =
      "/usr/bin/python3 -c \"import numpy as np, sys; a = np.load(sys.argv[1]); "
      "e = np.array([0.25, -1.5, 3e-8, 1e30, 7.0, -0.0], '<f4').reshape(1, 2, 3); "
      "sys.exit(0 if a.dtype == np.float32 and a.shape == (1, 2, 3) and "
      "a.tobytes() == e.tobytes() else 1)\" " + path;
  EXPECT_EQ(std::system(check.c_str()), 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gatescope::client
