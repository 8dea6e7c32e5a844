// Text models on the server side: UTF-8 checks, the SentencePiece tokenizer and the
// model's length policy, padded gathering of mixed lengths, and the text task's request
// checks. tests/data/tiny_sentencepiece.model is a 400-piece unigram model (pad 0, unk 1,
// byte fallback, nmt_nfkc_cf) trained by python3-sentencepiece on the first 3,000 WordNet
// noun glosses; the Python/server parity on real texts is tests/integration/test_text.py.
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/api/infer_results.h"
#include "server/config/model_config.h"
#include "server/preprocess/sentencepiece_spec.h"
#include "server/preprocess/text_tokenizer.h"
#include "server/preprocess/utf8.h"
#include "server/tasks/instance_warm_up.h"
#include "server/tasks/model_instance.h"
#include "server/tasks/task_registry.h"
#include "server/tasks/text_batches.h"
#include "tests/mocks/fake_runner.h"

namespace gatescope {
namespace {

using testing::FakeRunner;

std::string TinyModel() {
  std::ifstream in(std::string(GATESCOPE_SOURCE_DIR) + "/tests/data/tiny_sentencepiece.model",
                   std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TextConfig Config(int max_tokens, const std::string& overflow, int64_t max_bytes = 0) {
  TextConfig c;
  c.set_tokenizer("sentencepiece");
  c.set_tokenizer_file("tokenizer.model");
  c.set_max_tokens(max_tokens);
  c.set_overflow(overflow);
  c.set_max_text_bytes(max_bytes);
  c.set_pad_id(0);
  return c;
}

TEST(Utf8Test, AcceptsValidAndPointsAtTheFirstInvalidByte) {
  EXPECT_FALSE(FirstInvalidUtf8("plain ascii").has_value());
  EXPECT_FALSE(FirstInvalidUtf8("w\xC3\xB6rld \xF0\x9F\x91\x8D \xE4\xB8\xAD").has_value());
  EXPECT_FALSE(FirstInvalidUtf8("\xF4\x8F\xBF\xBF").has_value());  // U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("ab\x80").value(), 2u);               // lone continuation
  EXPECT_EQ(FirstInvalidUtf8("a\xC0\x80").value(), 1u);            // overlong NUL
  EXPECT_EQ(FirstInvalidUtf8("\xE0\x80\xAF").value(), 0u);         // overlong 3-byte
  EXPECT_EQ(FirstInvalidUtf8("x\xED\xA0\x80").value(), 1u);        // UTF-16 surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xF4\x90\x80\x80").value(), 0u);     // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xF5\x80\x80\x80").value(), 0u);
  EXPECT_EQ(FirstInvalidUtf8("ok\xE4\xB8").value(), 2u);           // cut short
  EXPECT_EQ(FirstInvalidUtf8(std::string("a\xFF", 2)).value(), 1u);
}

TEST(TextTokenizerTest, EncodesLikeTheTrainerWithCodePointOffsets) {
  auto tokenizer = TextTokenizer::Create(TinyModel(), Config(64, "truncate"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // Ids and offsets python3-sentencepiece gives for this text with the same model
  // (encode(..., out_type="immutable_proto")).
  auto text = (*tokenizer)->Tokenize("Hello w\xC3\xB6rld \xF0\x9F\x91\x8D \xE4\xB8\xAD\xE6\x96\x87");
  ASSERT_TRUE(text.ok()) << text.status();
  const std::vector<int> ids = {333, 360, 322, 317, 197, 184, 268, 272, 267, 261, 242,
                                161, 147, 143, 261, 230, 186, 175, 232, 152, 137};
  const std::vector<std::pair<int, int>> spans = {
      {0, 1}, {1, 3}, {3, 5}, {5, 7}, {7, 7}, {7, 8}, {8, 9}, {9, 10}, {10, 11}, {11, 12},
      {12, 12}, {12, 12}, {12, 12}, {12, 13}, {13, 14}, {14, 14}, {14, 14}, {14, 15},
      {15, 15}, {15, 15}, {15, 16}};
  ASSERT_EQ(text->pieces.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(text->pieces[i].id, ids[i]) << i;
    EXPECT_EQ(text->pieces[i].begin, spans[i].first) << i;
    EXPECT_EQ(text->pieces[i].end, spans[i].second) << i;
  }
  EXPECT_EQ((*tokenizer)->piece(text->pieces[0].id), "\xE2\x96\x81h");  // "▁h"
  EXPECT_FALSE(text->truncated);
}

TEST(TextTokenizerTest, AppliesTheModelsLengthPolicy) {
  const std::string text = "the quick brown fox jumps over the lazy dog";
  auto whole = TextTokenizer::Create(TinyModel(), Config(64, "truncate")).value()->Tokenize(text);
  ASSERT_TRUE(whole.ok());
  ASSERT_GT(whole->pieces.size(), 5u);
  EXPECT_FALSE(whole->truncated);
  auto cut = TextTokenizer::Create(TinyModel(), Config(5, "truncate")).value()->Tokenize(text);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->pieces.size(), 5u);
  EXPECT_TRUE(cut->truncated);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(cut->pieces[i].id, whole->pieces[i].id);
  auto refused = TextTokenizer::Create(TinyModel(), Config(5, "refuse")).value()->Tokenize(text);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("max_tokens"), std::string::npos);
}

// `count` words of many kinds (scripts, accents, emoji, punctuation, tabs, runs of spaces
// and line breaks) followed by `more`, in a scrambled order, each followed by a space or
// (every eleventh) a line break.
std::string TextOfWords(const std::vector<std::string>& more, int count) {
  std::vector<std::string> words = {
      "the", "r\xC3\xA9sum\xC3\xA9", "fox,", "\xE4\xB8\xAD\xE6\x96\x87", "jumps\tover",
      "\xF0\x9F\x91\x8D", "don't", "CAF\xC3\x89", "x=1;y=2", "co-operate.", "\xEF\xBC\xA1",
      "\xE2\x91\xB4", "\n\n", "a\xCC\x81", "  ", "NAME:", "(42)"};
  words.insert(words.end(), more.begin(), more.end());
  std::string text;
  for (int i = 0; i < count; ++i) {
    text += words[(i * 7 + i / 5) % words.size()];
    text += (i % 11 == 0) ? "\n" : " ";
  }
  return text;
}

// Texts of many words, cut into pieces by a tokenizer that reads every piece and by ones
// that stop after a few: the latter encode only a start of the text, and their pieces
// must be the whole text's first ones, with the same ids and offsets.
TEST(TextTokenizerTest, ALongTextsFirstPiecesAreTheWholeTextsOwn) {
  const std::string text = TextOfWords(
      {"photosynthesising", "internationalisation", "uncharacteristically",
       "counterrevolutionaries"},
      600);
  auto all = TextTokenizer::Create(TinyModel(), Config(1 << 20, "truncate")).value();
  ASSERT_TRUE(all->words_encode_alone());
  auto whole = all->Tokenize(text);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_FALSE(whole->truncated);
  ASSERT_GT(whole->pieces.size(), 1500u);
  for (int max_tokens : {1, 2, 7, 64, 128, 333, 1000}) {
    auto cut = TextTokenizer::Create(TinyModel(), Config(max_tokens, "truncate"))
                   .value()
                   ->Tokenize(text);
    ASSERT_TRUE(cut.ok()) << cut.status();
    ASSERT_EQ(cut->pieces.size(), static_cast<size_t>(max_tokens));
    EXPECT_TRUE(cut->truncated);
    // Only a start was encoded, unless the text is within 1.5 times its first guess.
    if (max_tokens <= 333) {
      EXPECT_LT(cut->encoded_bytes, text.size()) << max_tokens;
    }
    for (int i = 0; i < max_tokens; ++i) {
      ASSERT_EQ(cut->pieces[i].id, whole->pieces[i].id) << max_tokens << " " << i;
      ASSERT_EQ(cut->pieces[i].begin, whole->pieces[i].begin) << max_tokens << " " << i;
      ASSERT_EQ(cut->pieces[i].end, whole->pieces[i].end) << max_tokens << " " << i;
    }
  }
  // Exactly max_tokens pieces: read whole, not truncated; one more: truncated.
  const int n = static_cast<int>(whole->pieces.size());
  for (int max_tokens : {n, n - 1}) {
    auto edge = TextTokenizer::Create(TinyModel(), Config(max_tokens, "truncate"))
                    .value()
                    ->Tokenize(text);
    ASSERT_TRUE(edge.ok());
    EXPECT_EQ(edge->pieces.size(), static_cast<size_t>(max_tokens));
    EXPECT_EQ(edge->truncated, max_tokens < n);
  }
  // Under "refuse" a long text is refused without being encoded whole, and one that fits
  // is read whole.
  auto refused = TextTokenizer::Create(TinyModel(), Config(64, "refuse")).value()->Tokenize(text);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("more than 64 tokens"), std::string::npos);
  auto fits = TextTokenizer::Create(TinyModel(), Config(n, "refuse")).value()->Tokenize(text);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->pieces.size(), static_cast<size_t>(n));
}

// The rule itself: at every place IsWordCut allows in a text of many kinds of words, the
// text's start encodes into exactly the whole text's pieces up to there, and no piece of
// the whole text lies inside the start.
TEST(TextTokenizerTest, EveryCutTheRuleAllowsKeepsTheWholeTextsPieces) {
  const std::string text = TextOfWords({"\xC2\xA0", "~", "\x7F"}, 300);
  auto all = TextTokenizer::Create(TinyModel(), Config(1 << 20, "truncate")).value();
  ASSERT_TRUE(all->words_encode_alone());
  auto whole = all->Tokenize(text);
  ASSERT_TRUE(whole.ok()) << whole.status();
  int cuts = 0;
  for (size_t p = 0; p < text.size(); ++p) {
    if (!IsWordCut(text, p)) continue;
    ++cuts;
    int32_t chars = 0;
    for (size_t b = 0; b < p; ++b) chars += (static_cast<unsigned char>(text[b]) & 0xC0) != 0x80;
    auto start = all->Tokenize(std::string_view(text).substr(0, p));
    ASSERT_TRUE(start.ok()) << p;
    ASSERT_LT(start->pieces.size(), whole->pieces.size()) << p;
    for (size_t k = 0; k < start->pieces.size(); ++k) {
      ASSERT_EQ(start->pieces[k].id, whole->pieces[k].id) << p << " " << k;
      ASSERT_EQ(start->pieces[k].begin, whole->pieces[k].begin) << p << " " << k;
      ASSERT_EQ(start->pieces[k].end, whole->pieces[k].end) << p << " " << k;
    }
    ASSERT_GE(whole->pieces[start->pieces.size()].begin, chars) << p;
  }
  EXPECT_GT(cuts, 120);
}

// A text with no place to cut (no space after an ASCII graphic character: here CJK words,
// and tabs and line breaks after ASCII) is encoded whole.
TEST(TextTokenizerTest, ATextWithoutWordBreaksIsEncodedWhole) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "\xE4\xB8\xAD\xE6\x96\x87 ab\t\n";
  auto tokenizer = TextTokenizer::Create(TinyModel(), Config(10, "truncate")).value();
  ASSERT_TRUE(tokenizer->words_encode_alone());
  auto all = TextTokenizer::Create(TinyModel(), Config(1 << 20, "truncate")).value();
  auto whole = all->Tokenize(text);
  auto cut = tokenizer->Tokenize(text);
  ASSERT_TRUE(whole.ok() && cut.ok());
  EXPECT_EQ(cut->encoded_bytes, text.size());
  ASSERT_EQ(cut->pieces.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(cut->pieces[i].id, whole->pieces[i].id) << i;
}

// Each thread reuses one scratch message in the shim, and replaces it after a text of
// more than 4096 pieces: texts of every size, encoded in turn on several threads, must
// still get exactly what a fresh tokenizer on a fresh thread gives them.
TEST(TextTokenizerTest, ReusedScratchGivesEachTextItsOwnPieces) {
  auto tokenizer = TextTokenizer::Create(TinyModel(), Config(1 << 20, "truncate")).value();
  std::vector<std::string> texts = {"a", "the quick brown fox", "\xE4\xB8\xAD\xE6\x96\x87 x"};
  std::string huge;
  for (int i = 0; i < 2500; ++i) huge += (i % 3 ? "fox " : "r\xC3\xA9sum\xC3\xA9 ");
  texts.push_back(huge);
  texts.push_back("b c");
  texts.push_back(huge.substr(0, 301));
  // Each text alone on a thread of its own, whose scratch is new (the probe Create runs
  // used this thread's).
  std::vector<TokenizedText> expected;
  for (const std::string& text : texts) {
    TokenizedText fresh;
    std::thread([&] { fresh = tokenizer->Tokenize(text).value(); }).join();
    expected.push_back(fresh);
  }
  ASSERT_GT(expected[3].pieces.size(), 4096u);
  auto same = [](const TokenizedText& a, const TokenizedText& b) {
    if (a.pieces.size() != b.pieces.size()) return false;
    for (size_t i = 0; i < a.pieces.size(); ++i) {
      if (a.pieces[i].id != b.pieces[i].id || a.pieces[i].begin != b.pieces[i].begin ||
          a.pieces[i].end != b.pieces[i].end) {
        return false;
      }
    }
    return true;
  };
  std::vector<int> wrong(3, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + t + round) % texts.size();
          auto got = tokenizer->Tokenize(texts[k]);
          if (!got.ok() || !same(*got, expected[k])) ++wrong[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>(3, 0));
}

TEST(SentencePieceSpecTest, ReadsTheSettingsThatDecideWordByWordEncoding) {
  SentencePieceSpec tiny;
  ASSERT_TRUE(ReadSentencePieceSpec(TinyModel(), &tiny));
  EXPECT_EQ(tiny.normalizer_name, "nmt_nfkc_cf");
  EXPECT_FALSE(tiny.has_normalization_rules);
  EXPECT_FALSE(tiny.treat_whitespace_as_suffix);
  // trainer_spec { treat_whitespace_as_suffix: true } normalizer_spec { name: "nfkc" }
  const std::string suffix("\x12\x03\xC0\x01\x01\x1A\x06\x0A\x04nfkc", 13);
  SentencePieceSpec spec;
  ASSERT_TRUE(ReadSentencePieceSpec(suffix, &spec));
  EXPECT_TRUE(spec.treat_whitespace_as_suffix);
  EXPECT_EQ(spec.normalizer_name, "nfkc");
  EXPECT_TRUE(spec.escape_whitespaces);
  // normalizer_spec { name: "nfkc" escape_whitespaces: false normalization_rule_tsv: "a\tb" }
  const std::string rules("\x1A\x0D\x0A\x04nfkc\x28\x00\x32\x03" "a\tb", 15);
  SentencePieceSpec ruled;
  ASSERT_TRUE(ReadSentencePieceSpec(rules, &ruled));
  EXPECT_EQ(ruled.normalizer_name, "nfkc");
  EXPECT_TRUE(ruled.has_normalization_rules);
  EXPECT_FALSE(ruled.escape_whitespaces);
  EXPECT_FALSE(ruled.treat_whitespace_as_suffix);
  // A submessage longer than the bytes, a truncated varint, a bad wire type.
  for (const std::string& bad :
       {std::string("\x1A\x20\x0A\x04nfkc", 7), std::string("\x12\x02\xC0", 3),
        std::string("\x0F\x01", 2)}) {
    EXPECT_FALSE(ReadSentencePieceSpec(bad, &spec)) << ::testing::PrintToString(bad);
  }
}

TEST(TextTokenizerTest, RefusesBadText) {
  auto tokenizer = TextTokenizer::Create(TinyModel(), Config(64, "truncate", 32)).value();
  for (const std::string& bad : {std::string(), std::string("ab\xC0\x80"), std::string(33, 'a'),
                                 std::string("   \t\n ")}) {
    EXPECT_EQ(tokenizer->Tokenize(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(tokenizer->Tokenize(std::string(32, 'a')).ok());
}

TEST(TextTokenizerTest, RefusesWhatIsNotItsModel) {
  EXPECT_EQ(TextTokenizer::Create("not a model", Config(8, "truncate")).status().code(),
            absl::StatusCode::kInvalidArgument);
  TextConfig other_pad = Config(8, "truncate");
  other_pad.set_pad_id(3);
  EXPECT_EQ(TextTokenizer::Create(TinyModel(), other_pad).status().code(),
            absl::StatusCode::kInvalidArgument);
  TextConfig bad = Config(8, "drop");
  EXPECT_EQ(CheckTextConfig(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTextConfig(Config(0, "truncate")).code(), absl::StatusCode::kInvalidArgument);
}

at::Tensor Ids(std::vector<int64_t> ids) { return at::tensor(ids, at::kLong); }

TEST(TextBatchesTest, PadsEachLengthBucketToItsLongestWithAMask) {
  const std::vector<at::Tensor> examples = {Ids({5, 6, 7}), Ids(std::vector<int64_t>(20, 9)),
                                            Ids({8, 9, 10, 11, 12})};
  auto batches = GatherTokenSequences(examples, 0, TextPadding::kBuckets);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].members, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(batches[1].members, (std::vector<size_t>{1}));
  const at::Tensor& ids = batches[0].inputs[0];
  const at::Tensor& mask = batches[0].inputs[1];
  EXPECT_TRUE(ids.equal(Ids({5, 6, 7, 0, 0, 8, 9, 10, 11, 12}).reshape({2, 5})));
  EXPECT_TRUE(mask.equal(at::tensor(std::vector<int64_t>{1, 1, 1, 0, 0, 1, 1, 1, 1, 1})
                             .to(at::kBool)
                             .reshape({2, 5})));
  EXPECT_EQ(batches[1].inputs[0].sizes(), (std::vector<int64_t>{1, 20}));
  EXPECT_TRUE(batches[1].inputs[1].all().item<bool>());

  auto one = GatherTokenSequences(examples, 3, TextPadding::kLongest);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].inputs[0].sizes(), (std::vector<int64_t>{3, 20}));
  EXPECT_EQ(one[0].inputs[0][0][3].item<int64_t>(), 3);  // the pad id
  EXPECT_EQ(one[0].inputs[1].sum().item<int64_t>(), 28);
  EXPECT_EQ(LengthBucket(1), 16);
  EXPECT_EQ(LengthBucket(16), 16);
  EXPECT_EQ(LengthBucket(17), 32);
  EXPECT_EQ(LengthBucket(256), 256);
}

TEST(TextBatchesTest, WholeBucketsPadEachCallToItsBucketsFullLengthWithinTheModels) {
  const std::vector<at::Tensor> examples = {Ids({5, 6, 7}), Ids(std::vector<int64_t>(20, 9)),
                                            Ids({8, 9, 10, 11, 12}),
                                            Ids(std::vector<int64_t>(36, 4)),
                                            Ids(std::vector<int64_t>(50, 3))};
  // The model reads at most 40 pieces: the bucket of 33-64 pads to 40, and a longer
  // example (not one a text task makes) keeps its own length rather than being cut.
  auto batches = GatherTokenSequences(examples, 2, TextPadding::kWholeBuckets, 40);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].members, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(batches[1].members, (std::vector<size_t>{1}));
  EXPECT_EQ(batches[2].members, (std::vector<size_t>{3, 4}));
  const at::Tensor& ids = batches[0].inputs[0];
  const at::Tensor& mask = batches[0].inputs[1];
  ASSERT_EQ(ids.sizes().vec(), (std::vector<int64_t>{2, 16}));
  EXPECT_TRUE(ids[0].narrow(0, 0, 3).equal(Ids({5, 6, 7})));
  EXPECT_TRUE(ids[0].narrow(0, 3, 13).eq(2).all().item<bool>());  // the pad id
  EXPECT_TRUE(ids[1].narrow(0, 0, 5).equal(Ids({8, 9, 10, 11, 12})));
  EXPECT_EQ(mask[0].sum().item<int64_t>(), 3);
  EXPECT_EQ(mask[1].sum().item<int64_t>(), 5);
  EXPECT_TRUE(mask[1].narrow(0, 0, 5).all().item<bool>());
  EXPECT_EQ(batches[1].inputs[0].sizes().vec(), (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(batches[1].inputs[1].sum().item<int64_t>(), 20);
  EXPECT_EQ(batches[2].inputs[0].sizes().vec(), (std::vector<int64_t>{2, 50}));
  // Without a bound (0) the bucket is padded whole.
  auto unbounded = GatherTokenSequences({Ids(std::vector<int64_t>(20, 1))}, 0,
                                        TextPadding::kWholeBuckets, 0);
  EXPECT_EQ(unbounded[0].inputs[0].sizes().vec(), (std::vector<int64_t>{1, 32}));

  EXPECT_EQ(WholeBucketLengths(64), (std::vector<int64_t>{16, 32, 64}));
  EXPECT_EQ(WholeBucketLengths(40), (std::vector<int64_t>{16, 32, 40}));
  EXPECT_EQ(WholeBucketLengths(16), (std::vector<int64_t>{16}));
  EXPECT_EQ(WholeBucketLengths(8), (std::vector<int64_t>{8}));
}

constexpr char kTextModel[] = R"({"task":"text_classification","labels":["a","b"],
  "outputs":["logits","gate_mean"],"cls_token":true,"maps":["attention","gate"],"layers":2,
  "heads":2,"text":{"tokenizer":"sentencepiece","tokenizer_file":"tokenizer.model",
  "max_tokens":8,"overflow":"truncate","pad_id":0}})";

std::unique_ptr<Task> TextTask(int max_tokens = 8) {
  std::string json = kTextModel;
  const std::string eight = "\"max_tokens\":8";
  json.replace(json.find(eight), eight.size(), "\"max_tokens\":" + std::to_string(max_tokens));
  auto config = ParseModelConfig(json);
  EXPECT_TRUE(config.ok()) << config.status();
  auto task = CreateTask(*config, TaskOptions(), [](const std::string& name)
                                                      -> absl::StatusOr<std::string> {
    if (name != "tokenizer.model") return absl::NotFoundError(name);
    return TinyModel();
  });
  EXPECT_TRUE(task.ok()) << task.status();
  return *std::move(task);
}

TEST(TextTaskTest, WarmsUpWithTheLongestTextItReadsAllPadIds) {
  auto task = TextTask();
  auto example = task->WarmUpExample();
  ASSERT_TRUE(example.ok()) << example.status();
  EXPECT_EQ(example->sizes().vec(), (std::vector<int64_t>{8}));  // max_tokens
  EXPECT_EQ(example->scalar_type(), at::kLong);
  EXPECT_TRUE(example->eq(0).all().item<bool>());  // pad_id
  // Gathered as requests are: token ids and a mask that reads every piece.
  auto batches = task->Gather({*example, *example}, CallShapes{});
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 1u);
  ASSERT_EQ((*batches)[0].inputs.size(), 2u);
  EXPECT_EQ((*batches)[0].inputs[0].sizes().vec(), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ((*batches)[0].inputs[1].sum().item<int64_t>(), 16);
}

TEST(TextTaskTest, AnInstanceThatRecordsGraphsGetsCallsOfWholeLengthBuckets) {
  auto task = TextTask(40);
  FakeRunner graphs;
  graphs.SetRecordsCudaGraphs(true);
  const CallShapes whole = CallShapesFor(graphs);
  EXPECT_TRUE(whole.whole_length_buckets);
  EXPECT_FALSE(CallShapesFor(FakeRunner()).whole_length_buckets);
  InstanceSpec gpu;
  gpu.kind = InstanceSpec::Kind::kGpu;
  gpu.cuda_graphs = true;
  gpu.max_batch_size = 2;

  const std::vector<at::Tensor> texts = {Ids({5, 6, 7}), Ids(std::vector<int64_t>(20, 9))};
  auto as_requests = task->Gather(texts, CallShapes{});
  ASSERT_TRUE(as_requests.ok());
  EXPECT_EQ((*as_requests)[0].inputs[0].sizes().vec(), (std::vector<int64_t>{1, 3}));
  auto bucketed = task->Gather(texts, whole);
  ASSERT_TRUE(bucketed.ok());
  ASSERT_EQ(bucketed->size(), 2u);
  EXPECT_EQ((*bucketed)[0].inputs[0].sizes().vec(), (std::vector<int64_t>{1, 16}));
  EXPECT_EQ((*bucketed)[1].inputs[0].sizes().vec(), (std::vector<int64_t>{1, 32}));
  EXPECT_EQ((*bucketed)[0].inputs[1].sum().item<int64_t>(), 3);

  EXPECT_TRUE(task->PaddedLengths(CallShapes{}).empty());
  ASSERT_EQ(task->PaddedLengths(whole), (std::vector<int64_t>{16, 32, 40}));

  // Warm-up records every length bucket at every batch bucket, on pad ids.
  FakeRunner runner;
  const auto calls = WarmUpCalls(gpu, {}, task->PaddedLengths(whole));
  ASSERT_TRUE(WarmUp(runner, *task, calls, whole).ok());
  std::vector<std::vector<int64_t>> expected;
  for (int64_t length : {16, 32, 40}) {
    for (int64_t batch : {1, 2}) {
      for (int i = 0; i < 3; ++i) expected.push_back({batch, length});
    }
  }
  EXPECT_EQ(runner.input_shapes(), expected);
  for (double sum : runner.input_sums()) EXPECT_EQ(sum, 0.0);  // pad id 0

  // A sample's text is repeated from its start to each length (cut where longer).
  FakeRunner sampled;
  const std::vector<WarmUpCall> text_calls =
      WarmUpCalls(gpu, {{1, 1, Ids({1, 2, 3})}}, task->PaddedLengths(whole));
  ASSERT_TRUE(WarmUp(sampled, *task, text_calls, whole).ok());
  const std::vector<double> sums = sampled.input_sums();
  ASSERT_EQ(sums.size(), 1u + 18u);
  EXPECT_EQ(sums[0], 6.0);   // the sample's own call: 1 + 2 + 3
  EXPECT_EQ(sums[1], 31.0);  // length 16: five times 1, 2, 3, then 1
  EXPECT_EQ(sums[7], 63.0);  // length 32: ten times, then 1, 2
  EXPECT_EQ(sums[13], 79.0);  // length 40: thirteen times, then 1
}

// A model_warmup sample "t" of `batch` texts for the text model's input, its data unset.
::inference::ModelWarmup TextSample(uint32_t batch) {
  ::inference::ModelWarmup w;
  w.set_name("t");
  w.set_batch_size(batch);
  auto& in = (*w.mutable_inputs())["text"];
  in.set_data_type(::inference::TYPE_STRING);
  in.add_dims(1);
  return w;
}

TEST(TextTaskTest, AConfiguredWarmUpSampleOfTextRunsTheTasksOwnExample) {
  auto task = TextTask();
  ::inference::ModelWarmup w = TextSample(2);
  auto& in = (*w.mutable_inputs())["text"];
  in.set_random_data(true);  // falls back to the task's example, as Triton falls back to zeros
  auto calls = SampleWarmUpCalls({w}, *task);
  ASSERT_TRUE(calls.ok()) << calls.status();
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0].batch, 2);
  EXPECT_FALSE((*calls)[0].example.defined());
  in.set_data_type(::inference::TYPE_FP32);
  EXPECT_EQ(SampleWarmUpCalls({w}, *task).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TextTaskTest, AWarmUpSampleFileGivesTheTextItsRequestsWouldSend) {
  auto task = TextTask();
  ::inference::ModelWarmup w = TextSample(3);
  auto& in = (*w.mutable_inputs())["text"];
  in.set_input_data_file("hello.bin");
  // One KServe BYTES element: its length (4 bytes, little endian), then the text.
  auto element = [](const std::string& text) {
    const uint32_t length = static_cast<uint32_t>(text.size());
    return std::string(reinterpret_cast<const char*>(&length), 4) + text;
  };
  std::map<std::string, std::string> files = {
      {"hello.bin", element("Hello w\xC3\xB6rld \xF0\x9F\x91\x8D \xE4\xB8\xAD\xE6\x96\x87")},
      {"two.bin", element("a") + element("b")},
      {"cut.bin", element("Hello").substr(0, 6)},
      {"bad.bin", element("ab\xC0\x80")},
      {"long.bin", element(std::string((16 << 20) + 1, 'a'))}};
  const WarmUpFileReader read = [&](const std::string& file, size_t max_bytes) {
    return files.at(file).substr(0, max_bytes);
  };
  auto calls = SampleWarmUpCalls({w}, *task, read);
  ASSERT_TRUE(calls.ok()) << calls.status();
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0].batch, 3);
  // The first max_tokens (8) ids python3-sentencepiece gives this text with this model.
  EXPECT_TRUE((*calls)[0].example.equal(
      at::tensor(std::vector<int64_t>{333, 360, 322, 317, 197, 184, 268, 272})));
  for (const auto& [file, says] : std::vector<std::pair<std::string, std::string>>{
           {"two.bin", "holds 10 bytes, not one BYTES element"},
           {"cut.bin", "holds 6 bytes, not one BYTES element"},
           {"bad.bin", "the text of 'bad.bin': "},
           // Read no further than one byte past the longest text a file may hold.
           {"long.bin", "holds more than 16777221 bytes, not one BYTES element"}}) {
    in.set_input_data_file(file);
    auto refused = SampleWarmUpCalls({w}, *task, read);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << file;
    EXPECT_NE(refused.status().message().find(says), std::string::npos) << refused.status();
  }
}

TEST(TextTaskTest, NeedsItsTokenizerAndTextBlock) {
  auto config = ParseModelConfig(kTextModel).value();
  EXPECT_EQ(CreateTask(config, TaskOptions()).status().code(), absl::StatusCode::kNotFound);
  config.clear_text();
  EXPECT_EQ(CreateTask(config, TaskOptions()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TextTaskTest, ChecksRequestsBeforeQueuing) {
  auto task = TextTask();
  v1::PredictRequest predict;
  v1::PredictResponse response;
  predict.set_image("png");
  EXPECT_EQ(task->Predict(predict, &response, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  predict.set_text("ab\xFF");
  auto bad = task->Predict(predict, &response, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("UTF-8"), std::string::npos);
  predict.set_text("");
  EXPECT_EQ(task->Predict(predict, &response, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  predict.set_text("a fine text");
  EXPECT_TRUE(task->Predict(predict, &response, nullptr).ok());

  v1::ExplainRequest explain;
  v1::ExplainResponse explained;
  explain.set_text("a fine text");
  explain.set_rollout(true);
  explain.set_heatmap_png(true);
  EXPECT_EQ(task->Explain(explain, &explained, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  explain.set_heatmap_png(false);
  explain.set_resonance(true);  // not a DAR model
  EXPECT_EQ(task->Explain(explain, &explained, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  explain.set_resonance(false);
  explain.add_attention_layers(1);
  explain.add_attention_queries(9);  // past the class token and 8 pieces
  EXPECT_EQ(task->Explain(explain, &explained, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  explain.clear_attention_queries();
  explain.add_attention_queries(8);
  explain.set_gates(true);
  EXPECT_TRUE(task->Explain(explain, &explained, nullptr).ok());
  explain.mutable_query_pixel()->set_y(1);  // a segmentation field
  EXPECT_EQ(task->Explain(explain, &explained, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Texts are tokenized before queuing (short ones on the receiving thread, long ones on a
// preparation thread), so the worker's Prepare only builds the ids; a job no scheduler
// prepared ahead tokenizes in Prepare, with the same result.
TEST(TextTaskTest, TextsAreTokenizedBeforeQueuing) {
  auto task = TextTask();
  v1::PredictRequest predict;
  predict.set_text("a fine text about a small dog");
  v1::PredictResponse first, second;
  auto ahead = task->Predict(predict, &first, nullptr);
  auto late = task->Predict(predict, &second, nullptr);
  ASSERT_TRUE(ahead.ok() && late.ok());
  EXPECT_TRUE((*ahead)->prepares_ahead());
  EXPECT_TRUE((*ahead)->prepares_on_caller());
  ASSERT_TRUE((*ahead)->PrepareAhead().ok());
  const absl::StatusOr<at::Tensor> ids = (*ahead)->Prepare();
  const absl::StatusOr<at::Tensor> ids_late = (*late)->Prepare();
  ASSERT_TRUE(ids.ok() && ids_late.ok());
  EXPECT_EQ(ids->scalar_type(), at::kLong);
  EXPECT_EQ(ids->size(0), 8);  // truncated to max_tokens
  EXPECT_TRUE(at::equal(*ids, *ids_late));

  std::string long_text;
  while (long_text.size() <= 4096) long_text += "a fine text about a small dog ";
  predict.set_text(long_text);
  v1::PredictResponse third;
  auto pooled = task->Predict(predict, &third, nullptr);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  EXPECT_TRUE((*pooled)->prepares_ahead());
  EXPECT_FALSE((*pooled)->prepares_on_caller());
  ASSERT_TRUE((*pooled)->PrepareAhead().ok());
  const absl::StatusOr<at::Tensor> pooled_ids = (*pooled)->Prepare();
  ASSERT_TRUE(pooled_ids.ok());
  EXPECT_TRUE(at::equal(*pooled_ids, *ids));  // the same first 8 pieces
}

// A KServe call's texts are all tokenized by the thread that receives it when small: the
// bound is on the call's total, not on each text.
TEST(TextTaskTest, AKServeCallTokenizesOnTheCallerOnlyWhenItsTextsAreSmallInAll) {
  auto task = TextTask();
  for (size_t each : {size_t{100}, size_t{3000}}) {
    ::inference::ModelInferRequest request;
    auto* in = request.add_inputs();
    in->set_name("text");
    in->set_datatype("BYTES");
    in->add_shape(2);
    for (int i = 0; i < 2; ++i) in->mutable_contents()->add_bytes_contents(std::string(each, 'a'));
    ::inference::ModelInferResponse response;
    auto results = std::make_shared<InferResults>(&request, &response, nullptr);
    auto jobs = task->Infer(request, results);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    ASSERT_EQ(jobs->size(), 2u);
    for (const auto& job : *jobs) {
      EXPECT_TRUE(job->prepares_ahead());
      EXPECT_EQ(job->prepares_on_caller(), each == 100) << each;  // 200 vs 6000 bytes
    }
  }
}

TEST(TextTaskTest, ImageTasksRefuseText) {
  auto config = ParseModelConfig(R"({"task":"image_classification","input":{"shape":[1,2,2]},
    "labels":["a","b"],"outputs":["logits"],"token_grid":[1,1],"cls_token":true,
    "maps":["attention"],"layers":1,"heads":1})").value();
  auto task = CreateTask(config, TaskOptions()).value();
  v1::PredictRequest predict;
  v1::PredictResponse response;
  predict.set_text("words");
  auto refused = task->Predict(predict, &response, nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("text"), std::string::npos) << refused.status();
  EXPECT_EQ(task->TextWarmUpExample("words").status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gatescope
