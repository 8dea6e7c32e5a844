#include "server/repository/monitoring_reference.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gatescope {
namespace {

// A card as models/monitoring_reference.py writes it, around its block.
std::string Card(const std::string& block) {
  return "# m\n\n## Monitoring reference\n\n| layer | mean |\n\n```json monitoring-reference\n" +
         block + "\n```\n\n## Later\n```json\n{}\n```\n";
}

TEST(MonitoringReferenceTest, ReadsEveryRecordOfTheBlock) {
  auto references = ParseMonitoringReference(Card(
      "[\n{\"metric\": \"gatescope_gate_mean\", \"output\": \"gate_mean\", \"examples\": 10000, "
      "\"mean\": [0.54068, 0.5168], \"std\": [0.03201, 0.0214]},\n"
      "{\"metric\": \"gatescope_plug_scale_mean\", \"mean\": [0.91379], \"std\": [0.00836]}\n]"));
  ASSERT_TRUE(references.ok()) << references.status();
  ASSERT_EQ(references->size(), 2u);
  EXPECT_EQ((*references)[0].family, "gate_mean");
  EXPECT_EQ((*references)[0].mean, (std::vector<double>{0.54068, 0.5168}));
  EXPECT_EQ((*references)[0].stddev, (std::vector<double>{0.03201, 0.0214}));
  EXPECT_EQ((*references)[1].family, "plug_scale_mean");
  EXPECT_EQ((*references)[1].mean, (std::vector<double>{0.91379}));
}

TEST(MonitoringReferenceTest, ACardWithoutTheBlockHasNoReferences) {
  auto references = ParseMonitoringReference("# m\n\n```json\n[]\n```\n");
  ASSERT_TRUE(references.ok());
  EXPECT_TRUE(references->empty());
}

TEST(MonitoringReferenceTest, MalformedBlocksAreInvalid) {
  for (const std::string& card :
       {Card("not json"), Card("{\"metric\": \"gatescope_gate_mean\"}"),
        Card("[{\"metric\": \"gate_mean\", \"mean\": [0.5], \"std\": [0.1]}]"),
        Card("[{\"metric\": \"gatescope_gate_mean\", \"mean\": [\"x\"], \"std\": [0.1]}]"),
        Card("[{\"metric\": \"gatescope_gate_mean\", \"mean\": [0.5]}]"),
        std::string("```json monitoring-reference\n[]")}) {
    EXPECT_EQ(ParseMonitoringReference(card).status().code(), absl::StatusCode::kInvalidArgument)
        << card;
  }
}

TEST(MonitoringReferenceTest, ReadsAFileAndAMissingFileIsEmpty) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  const std::string path = (dir / "monitoring_reference_test_card.md").string();
  std::ofstream(path) << Card("[{\"metric\": \"gatescope_gdla_gate_mean\", \"mean\": [0.38607, "
                              "0.51971, 0.5245], \"std\": [0.01761, 0.01261, 0.00084]}]");
  auto references = ReadMonitoringReference(path);
  ASSERT_TRUE(references.ok()) << references.status();
  ASSERT_EQ(references->size(), 1u);
  EXPECT_EQ((*references)[0].stddev, (std::vector<double>{0.01761, 0.01261, 0.00084}));
  std::filesystem::remove(path);
  auto missing = ReadMonitoringReference(path);
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->empty());
}

TEST(MonitoringReferenceTest, ACardWithWindowsLineEndsReadsTheSame) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  const std::string path = (dir / "monitoring_reference_crlf_card.md").string();
  std::string card = Card("[{\"metric\": \"gatescope_gate_mean\", \"mean\": [0.5], "
                          "\"std\": [0.1]}]");
  std::string crlf;
  for (char c : card) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  std::ofstream(path, std::ios::binary) << crlf;
  auto references = ReadMonitoringReference(path);
  ASSERT_TRUE(references.ok()) << references.status();
  ASSERT_EQ(references->size(), 1u);
  EXPECT_EQ((*references)[0].mean, (std::vector<double>{0.5}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gatescope
