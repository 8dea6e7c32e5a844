#include "client/text_output.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <opencv2/imgcodecs.hpp>

#include "client/requests.h"
#include "client/task_output.h"
#include "tests/unit/client/float_tensor.h"

namespace gatescope::client {
namespace {

// "Ça 😀 <ok> & \"so\"": Ç0 a1 ␠2 😀3 ␠4 <5 o6 k7 >8 ␠9 &10 ␠11 "12 s13 o14 "15.
const std::string kText = "\xC3\x87" "a \xF0\x9F\x98\x80 <ok> & \"so\"";

void AddToken(v1::TextInput* text, const std::string& piece, int id, int begin, int end) {
  v1::TextToken* t = text->add_tokens();
  t->set_piece(piece);
  t->set_id(id);
  t->set_begin(begin);
  t->set_end(end);
}

// Four pieces of kText, a rollout over them (and gates of 2 layers x 2 heads with `gates`).
v1::ExplainResponse Explanation(bool gates, bool truncated = false) {
  v1::ExplainResponse r;
  auto* c = r.add_classes();
  c->set_label("greeting <b>");
  c->set_probability(0.875f);
  c = r.add_classes();
  c->set_label("other");
  c->set_probability(0.125f);
  v1::TextInput* text = r.mutable_text();
  AddToken(text, "\xE2\x96\x81\xC3\x87" "a", 7, 0, 2);
  AddToken(text, "\xE2\x96\x81\xF0\x9F\x98\x80", 8, 2, 4);
  AddToken(text, "\xE2\x96\x81<", 9, 4, 6);
  AddToken(text, "ok", 10, 6, 8);
  text->set_pieces_read(4);  // pieces read
  text->set_truncated(truncated);
  text->set_chars_read(8);
  *r.mutable_rollout() = FloatTensor({4}, {0.1f, 0.4f, 0.2f, 0.3f});
  if (gates) {
    *r.add_gates() = FloatTensor({2, 4}, {0, 0.5f, 1, 0.25f, 0.1f, 0.2f, 0.3f, 0.4f});
    *r.add_gates() = FloatTensor({2, 4}, {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f});
  }
  return r;
}

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TextOutputTest, PredictLineHasClassesTokensAndTruncation) {
  v1::PredictResponse response;
  auto* c = response.add_classes();
  c->set_label("spam");
  c->set_probability(0.75f);
  response.mutable_text()->set_pieces_read(128);
  response.mutable_text()->set_truncated(true);
  response.mutable_text()->set_chars_read(431);
  auto out = std::move(NewTaskOutput("text_classification", {})).value();
  EXPECT_EQ(out->Predict(InputImage{"text1", "buy now", cv::Mat(), true}, response).value(),
            ",\"label\":\"spam\",\"score\":0.75,\"topk\":[{\"label\":\"spam\",\"score\":0.75}],"
            "\"tokens\":128,\"truncated\":true,\"chars_read\":431");
}

TEST(TextOutputTest, ExplainRequestsAskRolloutAndDeclaredGates) {
  OutputSettings settings;
  settings.maps = {"attention", "gate"};
  auto dgt = std::move(NewTaskOutput("text_classification", settings)).value();
  ExplainOptions o;
  o.target.model = "dgt";
  o.rollout = true;  // image classifiers would also get the server's heatmap PNG
  InputImage input{"text1", "hello", cv::Mat(), true};
  v1::ExplainRequest request = ExplainRequestFor(o, input);
  dgt->CompleteExplainRequest(request);
  EXPECT_EQ(request.input_case(), v1::ExplainRequest::kText);
  EXPECT_EQ(request.text(), "hello");
  EXPECT_TRUE(request.rollout());
  EXPECT_TRUE(request.gates());
  EXPECT_FALSE(request.heatmap_png());

  settings.maps = {"attention"};
  auto baseline = std::move(NewTaskOutput("text_classification", settings)).value();
  request = ExplainRequestFor(ExplainOptions{}, input);
  baseline->CompleteExplainRequest(request);
  EXPECT_TRUE(request.rollout());
  EXPECT_FALSE(request.gates());
  // Image classifiers' requests stay as the flags made them.
  auto image = std::move(NewTaskOutput("image_classification", settings)).value();
  request = ExplainRequestFor(o, InputImage{"a.png", "png", cv::Mat()});
  image->CompleteExplainRequest(request);
  EXPECT_EQ(request.image(), "png");
  EXPECT_TRUE(request.heatmap_png());
  EXPECT_FALSE(request.gates());
}

TEST(TextOutputTest, PredictRequestOfATextCarriesOnlyTheText) {
  PredictOptions o;
  o.target.model = "m";
  o.top_k = 2;
  o.out_dir = "/tmp/x";  // segmentation's mask_png is not asked of a text
  const v1::PredictRequest r = PredictRequestFor(o, InputImage{"text1", "hi", cv::Mat(), true});
  EXPECT_EQ(r.input_case(), v1::PredictRequest::kText);
  EXPECT_EQ(r.text(), "hi");
  EXPECT_EQ(r.top_k(), 2);
  EXPECT_FALSE(r.mask_png());
  EXPECT_EQ(PredictRequestFor(o, InputImage{"a.png", "png", cv::Mat()}).image(), "png");
}

TEST(TextOutputTest, ResponsesMustFitTheTextInCodePoints) {
  EXPECT_TRUE(CheckTextExplain(Explanation(true), kText, true).ok());
  v1::ExplainResponse r = Explanation(false);
  // 16 code points but 20 bytes: a piece ending at 17 is outside the text.
  r.mutable_text()->mutable_tokens(3)->set_end(17);
  absl::Status st = CheckTextExplain(r, kText);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(st.message()).find("outside the text's 16"), std::string::npos) << st;
  r = Explanation(false);
  *r.mutable_rollout() = FloatTensor({3}, {1, 2, 3});
  EXPECT_FALSE(CheckTextExplain(r, kText).ok());
  r = Explanation(false);
  r.clear_rollout();
  EXPECT_TRUE(CheckTextExplain(r, kText).ok());
  EXPECT_FALSE(CheckTextExplain(r, kText, /*need_rollout=*/true).ok());
  r = Explanation(true);
  *r.mutable_gates(1) = FloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(CheckTextExplain(r, kText).ok());
  r = Explanation(false);
  r.mutable_text()->mutable_tokens(1)->set_begin(0);  // back before piece 0's start ...
  r.mutable_text()->mutable_tokens(0)->set_begin(1);
  EXPECT_FALSE(CheckTextExplain(r, kText).ok());
  r = Explanation(false);
  *r.add_attention() = FloatTensor({1, 1, 4}, {1, 2, 3, 4});  // not over T + 1 = 5 tokens
  EXPECT_FALSE(CheckTextExplain(r, kText).ok());
}

TEST(TextOutputTest, ExplainPageShowsModelPredictionTruncationAndShadedText) {
  const v1::ExplainResponse r = Explanation(true, /*truncated=*/true);
  const std::vector<cv::Mat> gates = GateHeatmaps(r, "dgt_wordnet", ScaleMode::kShared);
  ASSERT_EQ(gates.size(), 2u);
  const std::string page =
      TextExplainPage("text1", kText, r, {"dgt_wordnet", "3"}, gates, ScaleMode::kShared);
  EXPECT_NE(page.find("<tr><th>model</th><td>dgt_wordnet</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<tr><th>version</th><td>3</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<b>greeting &lt;b&gt;</b> 0.875"), std::string::npos);
  EXPECT_NE(page.find("<p class=\"note\">truncated: the model read the first 4 tokens, the first 8 "
                      "characters of the text</p>"),
            std::string::npos);
  // The pieces cut the text by code points: the emoji piece is " 😀", "<" escaped.
  EXPECT_NE(page.find(">\xC3\x87" "a</span><span"), std::string::npos);
  EXPECT_NE(page.find("> \xF0\x9F\x98\x80</span>"), std::string::npos);
  EXPECT_NE(page.find("> &lt;</span>"), std::string::npos);
  EXPECT_NE(page.find(">ok</span><span class=\"unread\""), std::string::npos);
  EXPECT_NE(page.find("&gt; &amp; &quot;so&quot;</span></div>"), std::string::npos);
  // Rollout 0.1..0.4 on viridis from 0: the maximum is the scale's high end.
  EXPECT_NE(page.find("background:" + CssColour(ScaleColours(false)[255]) +
                      ";color:#000\" title=\"\xE2\x96\x81\xF0\x9F\x98\x80 \xC2\xB7 id 8 "
                      "\xC2\xB7 rollout 0.4\""),
            std::string::npos);
  EXPECT_NE(page.find("rollout: 0.1..0.4"), std::string::npos);
  // Two gate heatmaps inline; nothing loaded from elsewhere.
  size_t images = 0;
  for (size_t at = page.find("<img"); at != std::string::npos; at = page.find("<img", at + 1)) {
    EXPECT_EQ(page.compare(page.find("src=\"", at) + 5, 22, "data:image/png;base64,"), 0);
    ++images;
  }
  EXPECT_EQ(images, 2u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http:"), std::string::npos);
  EXPECT_EQ(page.find("https:"), std::string::npos);

  const std::string untruncated =
      TextExplainPage("text1", kText, Explanation(false), {"m", "1"}, {}, ScaleMode::kShared);
  EXPECT_EQ(untruncated.find("truncated:"), std::string::npos);
  EXPECT_EQ(untruncated.find("<h2>Gates</h2>"), std::string::npos);
}

TEST(TextOutputTest, ExplainWritesPageJsonNpyAndGatePicture) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "client_text_output_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  OutputSettings settings;
  settings.out_dir = dir.string();
  settings.model = "dgt_wordnet";
  settings.version = "1";
  auto out = std::move(NewTaskOutput("text_classification", settings)).value();
  const InputImage input{"text1", kText, cv::Mat(), true};
  v1::ExplainRequest request;
  request.add_attention_layers(5);
  v1::ExplainResponse response = Explanation(true);
  *response.add_attention() = FloatTensor({1, 1, 5}, {1, 2, 3, 4, 5});
  const std::string stem = (dir / "text1").string();
  EXPECT_EQ(out->Explain(input, request, response).value(),
            ",\"page\":\"" + stem + ".html\",\"json\":\"" + stem + ".json\",\"gate_heatmaps\":\"" +
                stem + ".gates.png\",\"npy\":[\"" + stem + ".rollout.npy\",\"" + stem +
                ".gates.npy\",\"" + stem + ".attention.L5.npy\"],\"label\":\"greeting <b>\","
                "\"score\":0.875,\"tokens\":4,\"truncated\":false,\"chars_read\":8");
  EXPECT_EQ(std::filesystem::file_size(stem + ".rollout.npy"), 128u + 4 * 4);
  EXPECT_EQ(std::filesystem::file_size(stem + ".gates.npy"), 128u + 2 * 2 * 4 * 4);
  EXPECT_NE(Slurp(stem + ".gates.npy").find("'shape': (2, 2, 4), }"), std::string::npos);
  EXPECT_FALSE(cv::imread(stem + ".gates.png").empty());
  const std::string json = Slurp(stem + ".json");
  EXPECT_NE(json.find("\"pieces\":[{\"piece\":\"\xE2\x96\x81\xC3\x87" "a\",\"id\":7,\"begin\":0,"
                      "\"end\":2},"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"rollout\":[0.100000001,0.400000006,0.200000003,0.300000012]"),
            std::string::npos);
  EXPECT_NE(json.find("\"gates\":[[[0,0.5,1,0.25],"), std::string::npos);
  EXPECT_NE(json.find("\"npy\":[\"text1.rollout.npy\",\"text1.gates.npy\","
                      "\"text1.attention.L5.npy\"]"),
            std::string::npos);
  const std::string page = Slurp(stem + ".html");
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page.find("<h2>Gates</h2>"), std::string::npos);

  // A malformed response fails this input alone.
  response.mutable_text()->mutable_tokens(0)->set_end(99);
  EXPECT_EQ(out->Explain(input, request, response).status().code(), absl::StatusCode::kDataLoss);
  std::filesystem::remove_all(dir);
}

TEST(TextOutputTest, ComparisonSharesOneScaleUnlessPerTile) {
  v1::ExplainResponse a = Explanation(false), b = Explanation(false);
  *b.mutable_rollout() = FloatTensor({4}, {0.05f, 0.1f, 0.2f, 0.05f});  // max 0.2, not 0.4
  const std::vector<TextCompareRow> rows = {
      {{"dgt_wordnet", "1"}, &a, ""},
      {{"transformer_wordnet", "2"}, &b, ""},
      {{"broken", ""}, nullptr, "UNAVAILABLE: no <server>"},
  };
  const std::string top = CssColour(ScaleColours(false)[255]);
  const std::string shared = TextComparePage("text1", kText, rows, ScaleMode::kShared);
  const size_t row_a = shared.find("dgt_wordnet"), row_b = shared.find("transformer_wordnet");
  ASSERT_NE(row_b, std::string::npos);
  EXPECT_NE(shared.find("background:" + top, row_a), std::string::npos);
  EXPECT_LT(shared.find("background:" + top, row_a), row_b);  // only a reaches the top
  EXPECT_EQ(shared.find("background:" + top, row_b), std::string::npos);
  EXPECT_NE(shared.find("rollout, all models: 0.05..0.4"), std::string::npos);
  EXPECT_NE(shared.find("<td class=\"error\">error: UNAVAILABLE: no &lt;server&gt;</td>"),
            std::string::npos);
  // Per tile: each row's maximum is its own scale's top.
  const std::string tile = TextComparePage("text1", kText, rows, ScaleMode::kTile);
  EXPECT_NE(tile.find("background:" + top, tile.find("transformer_wordnet")), std::string::npos);
  EXPECT_EQ(tile.find("all models"), std::string::npos);
}

}  // namespace
}  // namespace gatescope::client
