// Tokenizes texts with the server's TextTokenizer, for the Python/server parity test
// (tests/integration/test_text.py): the same class the text task uses, without a model
// pass per text.
//
// Usage: tokenize_texts TOKENIZER_MODEL MAX_TOKENS [--check-cuts N] < texts
// stdin: texts, each as a little-endian uint32 byte length and its bytes. stdout:
// "words_encode_alone 0|1" (TextTokenizer::words_encode_alone; when 0, why on stderr), then
// one line per text,
// "<pieces read> <truncated 0|1> <bytes encoded> id:begin:end ..." (code point offsets),
// or "ERROR <status>" for a text the server refuses.
//
// With --check-cuts N (MAX_TOKENS is then ignored), each text's line is instead
// "CUTS <checked> <bad> [<byte offset of the first bad cut>]" (CheckWordCuts at up to N
// places per text; "ERROR <message>" for a text the server refuses or SentencePiece
// fails on): whether the start of the
// text before each place IsWordCut allows is encoded into exactly the whole text's pieces
// up to it. This is what TextTokenizer relies on when it encodes only a start of a long
// text; it is checked for any tokenizer, whether or not words_encode_alone() admits it.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "server/preprocess/text_tokenizer.h"

namespace {

std::unique_ptr<gatescope::TextTokenizer> Tokenizer(const std::string& model,
                                                    const std::string& file, int max_tokens) {
  gatescope::TextConfig config;
  config.set_tokenizer("sentencepiece");
  config.set_tokenizer_file(file);
  config.set_max_tokens(max_tokens);
  config.set_overflow("truncate");
  config.set_max_text_bytes(int64_t{1} << 30);
  config.set_pad_id(0);
  auto tokenizer = gatescope::TextTokenizer::Create(model, config);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return nullptr;
  }
  return *std::move(tokenizer);
}

// The "CUTS" line of `text` (see the header comment).
std::string CheckCuts(const gatescope::TextTokenizer& tokenizer, const std::string& text,
                      size_t most) {
  const gatescope::WordCutCheck check = gatescope::CheckWordCuts(tokenizer.model(), text, most);
  if (!check.error.empty()) return "ERROR " + check.error;
  std::string line = "CUTS " + std::to_string(check.checked) + " " + std::to_string(check.bad);
  if (check.bad > 0) line += " " + std::to_string(check.first_bad);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  const bool check_cuts = argc == 5 && std::strcmp(argv[3], "--check-cuts") == 0;
  if (argc != 3 && !check_cuts) {
    std::cerr << "usage: tokenize_texts TOKENIZER_MODEL MAX_TOKENS [--check-cuts N] < texts\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream model;
  model << in.rdbuf();
  auto tokenizer = Tokenizer(model.str(), argv[1], check_cuts ? 1 << 30 : std::stoi(argv[2]));
  if (tokenizer == nullptr) return 1;
  const size_t most = check_cuts ? std::stoul(argv[4]) : 0;
  std::ios::sync_with_stdio(false);
  std::cout << "words_encode_alone " << (tokenizer->words_encode_alone() ? 1 : 0) << "\n";
  if (!tokenizer->words_encode_alone()) std::cerr << tokenizer->why_encoded_whole() << "\n";
  unsigned char header[4];
  while (std::fread(header, 1, 4, stdin) == 4) {
    const uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) |
                          (static_cast<uint32_t>(header[3]) << 24);
    std::string text(size, '\0');
    if (size > 0 && std::fread(text.data(), 1, size, stdin) != size) return 1;
    if (check_cuts) {
      const absl::Status valid = tokenizer->CheckText(text);
      std::cout << (valid.ok() ? CheckCuts(*tokenizer, text, most) : "ERROR " + valid.ToString())
                << "\n";
      continue;
    }
    auto tokens = tokenizer->Tokenize(text);
    if (!tokens.ok()) {
      std::cout << "ERROR " << tokens.status().ToString() << "\n";
      continue;
    }
    std::cout << tokens->pieces.size() << " " << (tokens->truncated ? 1 : 0) << " "
              << tokens->encoded_bytes;
    for (const auto& p : tokens->pieces) std::cout << " " << p.id << ":" << p.begin << ":" << p.end;
    std::cout << "\n";
  }
  return 0;
}
