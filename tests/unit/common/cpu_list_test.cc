// CPU lists as Linux writes them, and the calling thread's affinity on the real kernel.
#include "server/common/cpu_list.h"

#include <gtest/gtest.h>

#include <thread>

namespace gatescope {
namespace {

std::vector<int> Parsed(absl::string_view text) {
  absl::StatusOr<CpuList> list = ParseCpuList(text);
  EXPECT_TRUE(list.ok()) << text << ": " << list.status();
  return list.ok() ? list->cpus : std::vector<int>{-1};
}

TEST(CpuListTest, ParsesSinglesRangesAndMixturesSortedAndDistinct) {
  EXPECT_EQ(Parsed("0"), (std::vector<int>{0}));
  EXPECT_EQ(Parsed("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Parsed("8,1-2, 5 "), (std::vector<int>{1, 2, 5, 8}));
  EXPECT_EQ(Parsed("2,2,1-3"), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Parsed("4-4"), (std::vector<int>{4}));
  EXPECT_EQ(Parsed("1023"), (std::vector<int>{1023}));
}

TEST(CpuListTest, RefusesWhatIsNotAListWithTheReason) {
  for (const char* bad : {"", " ", "a", "1,,2", "-1", "3-1", "1-", "0-2-4", "1024", "1.5"}) {
    const absl::StatusOr<CpuList> list = ParseCpuList(bad);
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_NE(ParseCpuList("3-1").status().message().find("runs backwards"), std::string::npos);
  EXPECT_NE(ParseCpuList("0,x").status().message().find("'x' is not a CPU number"),
            std::string::npos);
}

TEST(CpuListTest, FormatsCollapsingRangesAndRoundTrips) {
  EXPECT_EQ(FormatCpuList(CpuList{{0, 1, 2, 3, 8}}), "0-3,8");
  EXPECT_EQ(FormatCpuList(CpuList{{1, 3, 5, 6}}), "1,3,5-6");
  EXPECT_EQ(FormatCpuList(CpuList{}), "");
  for (const char* text : {"0", "0-7", "1,3,5-6,9-11"}) {
    EXPECT_EQ(FormatCpuList(*ParseCpuList(text)), text);
  }
}

TEST(CpuListTest, SetOperations) {
  const CpuList all{{0, 1, 2, 3}}, some{{1, 3}};
  EXPECT_EQ(CpusNotIn(all, some).cpus, (std::vector<int>{0, 2}));
  EXPECT_TRUE(CpusNotIn(some, all).cpus.empty());
  EXPECT_TRUE(CpusWithin(some, all));
  EXPECT_FALSE(CpusWithin(all, some));
  EXPECT_FALSE(CpusWithin(CpuList{{4}}, all));
}

TEST(CpuListTest, FlagSyntax) {
  CpuList list{{7}};
  std::string error;
  ASSERT_TRUE(AbslParseFlag("0-2", &list, &error));
  EXPECT_EQ(list.cpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(AbslUnparseFlag(list), "0-2");
  ASSERT_TRUE(AbslParseFlag("", &list, &error));  // the default: not set
  EXPECT_TRUE(list.cpus.empty());
  EXPECT_FALSE(AbslParseFlag("2-0", &list, &error));
  EXPECT_NE(error.find("runs backwards"), std::string::npos) << error;
}

TEST(CpuListTest, ThreadAffinityIsSetReadBackAndInherited) {
  const CpuList mine = CurrentThreadCpus();
  ASSERT_FALSE(mine.cpus.empty());
  std::thread([&mine] {
    const CpuList last{{mine.cpus.back()}};
    ASSERT_TRUE(SetCurrentThreadCpus(last).ok());
    EXPECT_EQ(CurrentThreadCpus(), last);
    CpuList child;
    std::thread([&child] { child = CurrentThreadCpus(); }).join();
    EXPECT_EQ(child, last);  // threads started later inherit it
  }).join();
  EXPECT_EQ(CurrentThreadCpus(), mine);  // per thread: the caller's is untouched
  EXPECT_EQ(SetCurrentThreadCpus(CpuList{}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
