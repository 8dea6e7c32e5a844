#include "client/text_view.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gatescope::client {
namespace {

// Every shaded span's text, in order.
std::vector<std::string> SpanTexts(const std::string& html) {
  std::vector<std::string> out;
  for (size_t at = html.find("<span class=\"p\""); at != std::string::npos;
       at = html.find("<span class=\"p\"", at + 1)) {
    const size_t open = html.find('>', at) + 1;
    out.push_back(html.substr(open, html.find("</span>", open) - open));
  }
  return out;
}

// The style attribute of the span whose text is `text`.
std::string StyleOf(const std::string& html, const std::string& text) {
  const size_t end = html.find(">" + text + "</span>");
  if (end == std::string::npos) return "";
  const size_t at = html.rfind("<span", end);
  const size_t style = html.find("style=\"", at) + 7;
  return html.substr(style, html.find('"', style) - style);
}

ShadedPiece Piece(std::string piece, int32_t id, int32_t begin, int32_t end, float value) {
  return {std::move(piece), id, begin, end, value};
}

std::string Shade(const std::string& text, const std::vector<ShadedPiece>& pieces,
                  bool truncated = false) {
  const std::vector<ShadedRun> runs = ShadedRuns(pieces);
  return ShadedTextHtml(text, pieces, runs, ColourScale::For(RangeOfRuns(runs)), "rollout",
                        truncated);
}

TEST(TextViewTest, CodePointsAreCharactersNotBytes) {
  // h é l l o ␠ 👋 🏽 ! : 9 code points in 15 bytes.
  const std::string text = "h\xC3\xA9llo \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD!";
  const std::vector<std::string> cps = CodePoints(text);
  ASSERT_EQ(cps.size(), 9u);
  EXPECT_EQ(cps[1], "\xC3\xA9");
  EXPECT_EQ(cps[6], "\xF0\x9F\x91\x8B");
  EXPECT_EQ(cps[7], "\xF0\x9F\x8F\xBD");
  // A stray byte, a truncated sequence and a surrogate: each byte one U+FFFD.
  const std::vector<std::string> bad = CodePoints("a\xFF" "b\xE2\x82" "\xED\xA0\x80");
  ASSERT_EQ(bad.size(), 8u);
  EXPECT_EQ(bad[1], "\xEF\xBF\xBD");
  EXPECT_EQ(bad[2], "b");
}

TEST(TextViewTest, ShadingFollowsCodePointOffsetsOnUnicodeAndEmoji) {
  // "Ça coûte 5€ 😀 ok": Ç0 a1 ␠2 c3 o4 û5 t6 e7 ␠8 59 €10 ␠11 😀12 ␠13 o14 k15.
  const std::string text = "\xC3\x87" "a co\xC3\xBBte 5\xE2\x82\xAC \xF0\x9F\x98\x80 ok";
  const std::vector<ShadedPiece> pieces = {
      Piece("\xE2\x96\x81\xC3\x87" "a", 11, 0, 2, 0.1f),
      Piece("co\xC3\xBBt", 12, 3, 7, 0.2f),  // leaves the space at 2 and the "e" at 7 out
      Piece("\xE2\x96\x81" "5", 13, 8, 10, 0.3f),
      Piece("\xE2\x82\xAC", 14, 10, 11, 0.4f),
      Piece("<0xF0>", 15, 12, 13, 0.5f),  // byte-fallback pieces of one emoji ...
      Piece("<0x9F>", 16, 12, 13, 0.25f),  // ... share its character: one run, summed
      Piece("", 2, 13, 13, 0.9f),          // inserted by the tokenizer: not shown
      Piece("\xE2\x96\x81ok", 17, 13, 16, 0.6f),
  };
  const std::string html = Shade(text, pieces);
  EXPECT_EQ(SpanTexts(html),
            (std::vector<std::string>{"\xC3\x87" "a", "co\xC3\xBBt", " 5", "\xE2\x82\xAC",
                                      "\xF0\x9F\x98\x80", " ok"}));
  // The original text is all there, characters between pieces unshaded.
  EXPECT_NE(html.find("<div class=\"text\"><span"), std::string::npos);
  EXPECT_NE(html.find("</span> <span"), std::string::npos);  // the space at 2
  EXPECT_NE(html.find("</span>e<span"), std::string::npos);  // the "e" at 7
  EXPECT_NE(html.find("</span> <span class=\"p\" style=\"background:"), std::string::npos);
  // The emoji's run names both of its pieces and is shaded by their sum.
  const size_t emoji = html.find(">\xF0\x9F\x98\x80</span>");
  const size_t span = html.rfind("<span", emoji);
  const std::string tag = html.substr(span, emoji - span);
  EXPECT_NE(tag.find("&lt;0xF0&gt; \xC2\xB7 id 15 \xC2\xB7 rollout 0.5&#10;&lt;0x9F&gt; "
                     "\xC2\xB7 id 16 \xC2\xB7 rollout 0.25"),
            std::string::npos)
      << tag;
  EXPECT_NE(tag.find("data-value=\"0.75\""), std::string::npos) << tag;
  // Every piece's hover title names the piece, its id and its value.
  EXPECT_NE(html.find("title=\"\xE2\x96\x81" "5 \xC2\xB7 id 13 \xC2\xB7 rollout 0.3\""),
            std::string::npos);
  EXPECT_EQ(html.find("id 2 "), std::string::npos);  // the inserted piece
}

TEST(TextViewTest, TextAndPiecesAreHtmlEscaped) {
  const std::string text = "if a<b && c>\"d\" then 'e'";
  //                        0123456789...
  const std::vector<ShadedPiece> pieces = {
      Piece("\xE2\x96\x81if", 1, 0, 2, 0.1f),
      Piece("<b>&\"'", 2, 4, 6, 0.9f),  // "<b"
      Piece("&&", 3, 7, 9, 0.5f),
  };
  const std::string html = Shade(text, pieces);
  EXPECT_EQ(SpanTexts(html), (std::vector<std::string>{"if", "&lt;b", "&amp;&amp;"}));
  EXPECT_NE(html.find(" c&gt;&quot;d&quot; then &#39;e&#39;</div>"), std::string::npos) << html;
  EXPECT_NE(html.find("title=\"&lt;b&gt;&amp;&quot;&#39; \xC2\xB7 id 2"), std::string::npos);
  // No markup of the text's own survives: every '<' opens one of the page's own tags.
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    const std::string tag = html.substr(at, 5);
    EXPECT_TRUE(tag == "<div " || tag == "<span" || tag == "</spa" || tag == "</div") << tag;
  }
  EXPECT_EQ(HtmlEscape("<&>\"'"), "&lt;&amp;&gt;&quot;&#39;");
}

TEST(TextViewTest, ControlCharactersAreShownAndWhitespaceKept) {
  const std::string html = Shade(std::string("a\tb\nc\x01" "d", 7), {});
  EXPECT_EQ(html, "<div class=\"text\">a\tb\nc&#x2401;d</div>");
}

TEST(TextViewTest, ColoursAreTheScaleEndsAtTheMinimumAndMaximum) {
  const std::vector<cv::Vec3b> viridis = ScaleColours(false), diverging = ScaleColours(true);
  // Non-negative: viridis from 0, so 0 is the low end and the maximum the high end.
  const std::string text = "low mid high";
  std::string html = Shade(text, {Piece("low", 1, 0, 3, 0.f), Piece("mid", 2, 4, 7, 0.02f),
                                  Piece("high", 3, 8, 12, 0.08f)});
  EXPECT_EQ(StyleOf(html, "low"), "background:" + CssColour(viridis[0]) + ";color:#fff");
  EXPECT_EQ(StyleOf(html, "high"), "background:" + CssColour(viridis[255]) + ";color:#000");
  EXPECT_EQ(StyleOf(html, "mid"),
            "background:" + CssColour(viridis[64]) + ";color:" + ContrastColour(viridis[64]));
  // A positive minimum is not stretched to the low end (the scale starts at 0).
  html = Shade(text, {Piece("low", 1, 0, 3, 0.04f), Piece("high", 3, 8, 12, 0.08f)});
  EXPECT_EQ(StyleOf(html, "low"), "background:" + CssColour(viridis[128]) + ";color:" +
                                      ContrastColour(viridis[128]));
  // Signed: blue - grey - red symmetric about 0; the larger magnitude is an end.
  html = Shade(text, {Piece("low", 1, 0, 3, -0.5f), Piece("mid", 2, 4, 7, 0.f),
                      Piece("high", 3, 8, 12, 0.5f)});
  EXPECT_EQ(StyleOf(html, "low"), "background:" + CssColour(diverging[0]) + ";color:#fff");
  EXPECT_EQ(StyleOf(html, "high"), "background:" + CssColour(diverging[255]) + ";color:#fff");
  EXPECT_EQ(StyleOf(html, "mid"), "background:" + CssColour(diverging[128]) + ";color:#000");
  EXPECT_EQ(CssColour(cv::Vec3b(1, 2, 255)), "#ff0201");
}

TEST(TextViewTest, TextPastTheLastPieceIsMarkedUnreadWhenTruncated) {
  const std::vector<ShadedPiece> pieces = {Piece("one", 1, 0, 3, 1.f)};
  EXPECT_NE(Shade("one two", pieces, /*truncated=*/true)
                .find("</span><span class=\"unread\" title=\"not read: past the pieces the "
                      "model takes\"> two</span></div>"),
            std::string::npos);
  EXPECT_NE(Shade("one two", pieces).find("</span> two</div>"), std::string::npos);
}

TEST(TextViewTest, ColourBarShowsTheScaleItsEndsAndTheRange) {
  const MapRange range{0.02f, 0.5f, 4, 0};
  const std::string bar = ColourBarHtml(ColourScale::For(range), range, "rollout");
  EXPECT_NE(bar.find("linear-gradient(to right," + CssColour(ScaleColours(false)[0]) + " 0.00%"),
            std::string::npos);
  EXPECT_NE(bar.find(CssColour(ScaleColours(false)[255]) + " 100.00%)"), std::string::npos);
  EXPECT_NE(bar.find("<span>0</span><span>0.5</span>"), std::string::npos) << bar;
  EXPECT_NE(bar.find("<i style=\"left:100.00%\">"), std::string::npos);
  EXPECT_NE(bar.find("<i style=\"left:3.92%\">"), std::string::npos);  // 0.02 of 0.5: 10/255
  EXPECT_NE(bar.find("rollout: 0.02..0.5"), std::string::npos) << bar;
  const MapRange signed_range{-0.2f, 0.1f, 3, 0};
  const std::string signed_bar =
      ColourBarHtml(ColourScale::For(signed_range), signed_range, "rollout");
  EXPECT_NE(signed_bar.find("<span>-0.2</span><span>0</span><span>0.2</span>"),
            std::string::npos);
  EXPECT_NE(signed_bar.find("blue - grey - red"), std::string::npos);
}

TEST(TextViewTest, LabelsAreAsciiForThePicturesFont) {
  EXPECT_EQ(AsciiLabel("\xE2\x96\x81h\xC3\xA9llo"), "_h?llo");
  EXPECT_EQ(AsciiLabel("\xF0\x9F\x98\x80"), "?");
  EXPECT_EQ(AsciiLabel("abcdefghijklmnop", 5), "abcd~");
}

TEST(TextViewTest, HeatmapCellsAreTheScaleColoursAndLabelsFit) {
  cv::Mat map(2, 3, CV_32FC1);
  map.at<float>(0, 0) = 0.f;
  map.at<float>(0, 1) = 0.5f;
  map.at<float>(0, 2) = 1.f;
  map.at<float>(1, 0) = 1.f;
  map.at<float>(1, 1) = 0.25f;
  map.at<float>(1, 2) = 0.f;
  const ColourScale scale = ColourScale::For(RangeOf(map));
  const cv::Mat picture = TokenHeatmap(map, {"\xE2\x96\x81the", "\xE2\x96\x81" "cat", "s"}, scale,
                                       "gate L0", "h", "scale: shared");
  ASSERT_FALSE(picture.empty());
  ASSERT_EQ(picture.type(), CV_8UC3);
  // Find the cells: the first row whose pixels are the low end at x where cell (0, 0) is.
  const cv::Vec3b low = ScaleColour(0.f, scale), high = ScaleColour(1.f, scale);
  int x0 = -1, y0 = -1;
  for (int y = 0; y < picture.rows && x0 < 0; ++y) {
    for (int x = 0; x + 24 < picture.cols; ++x) {
      if (picture.at<cv::Vec3b>(y, x) == low && picture.at<cv::Vec3b>(y, x + 24) == high) {
        x0 = x;
        y0 = y;
        break;
      }
    }
  }
  ASSERT_GE(x0, 0) << "no cell row 0 found";
  EXPECT_EQ(picture.at<cv::Vec3b>(y0 + 14, x0), high);        // (1, 0)
  EXPECT_EQ(picture.at<cv::Vec3b>(y0 + 14, x0 + 24), low);    // (1, 2)
  EXPECT_TRUE(TokenHeatmap(map, {"a"}, scale, "t", "h", "").empty());  // labels do not match
}

TEST(TextViewTest, PagesLoadNothingFromElsewhere) {
  const std::string page = PageStart("a <title>") + PageEnd();
  EXPECT_NE(page.find("<title>a &lt;title&gt;</title>"), std::string::npos);
  EXPECT_NE(page.find("default-src 'none'; img-src data:;"), std::string::npos);
  EXPECT_EQ(page.find("http:"), std::string::npos);
  EXPECT_EQ(page.find("https:"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  const std::string png = PngDataUri(cv::Mat(2, 2, CV_8UC3, cv::Scalar(1, 2, 3)));
  EXPECT_EQ(png.rfind("data:image/png;base64,iVBORw0KGgo", 0), 0u);  // the PNG signature
}

}  // namespace
}  // namespace gatescope::client
