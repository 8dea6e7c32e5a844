// Tokenizes texts with the server's TextTokenizer, for the Python/server parity test
// (tests/integration/test_text.py): the same class the text task uses, without a model
// pass per text.
//
// Usage: tokenize_texts TOKENIZER_MODEL MAX_TOKENS [--check-cuts N] < texts
// stdin: texts, each as a little-endian uint32 byte length and its bytes. stdout:
// "words_encode_alone 0|1" (TextTokenizer::words_encode_alone), then one line per text,
// "<pieces read> <truncated 0|1> <bytes encoded> id:begin:end ..." (code point offsets),
// or "ERROR <status>" for a text the server refuses.
//
// With --check-cuts N (MAX_TOKENS is then ignored), each text's line is instead
// "CUTS <checked> <bad> [<byte offset of the first bad cut>]": for up to N of the places
// IsWordCut allows (all of them, or N spread over the text), whether the start of the text
// before that place is encoded into exactly the whole text's pieces up to it (the same
// ids and offsets, and no piece of the whole text left inside the start). This is what
// TextTokenizer relies on when it encodes only a start of a long text; it is checked for
// any tokenizer, whether or not words_encode_alone() admits it.
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

bool SamePiece(const gatescope::TextPiece& a, const gatescope::TextPiece& b) {
  return a.id == b.id && a.begin == b.begin && a.end == b.end;
}

// The "CUTS" line of `text` (see the header comment); `whole` encodes texts whole.
std::string CheckCuts(const gatescope::TextTokenizer& whole, const std::string& text,
                      size_t most) {
  std::vector<size_t> cuts;
  for (size_t p = 0; p < text.size(); ++p) {
    if (gatescope::IsWordCut(text, p)) cuts.push_back(p);
  }
  auto all = whole.Tokenize(text);
  if (!all.ok()) return "ERROR " + all.status().ToString();
  size_t checked = 0, bad = 0, first_bad = 0;
  const size_t step = cuts.size() <= most ? 1 : (cuts.size() + most - 1) / most;
  for (size_t i = 0; i < cuts.size(); i += step) {
    const size_t p = cuts[i];
    int32_t chars = 0;  // code points before p
    for (size_t b = 0; b < p; ++b) chars += (static_cast<unsigned char>(text[b]) & 0xC0) != 0x80;
    auto start = whole.Tokenize(std::string_view(text).substr(0, p));
    bool same = start.ok() && start->pieces.size() <= all->pieces.size();
    for (size_t k = 0; same && k < start->pieces.size(); ++k) {
      same = SamePiece(start->pieces[k], all->pieces[k]);
    }
    if (same && start->pieces.size() < all->pieces.size()) {
      same = all->pieces[start->pieces.size()].begin >= chars;
    }
    ++checked;
    if (!same && bad++ == 0) first_bad = p;
  }
  std::string line = "CUTS " + std::to_string(checked) + " " + std::to_string(bad);
  if (bad > 0) line += " " + std::to_string(first_bad);
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
  unsigned char header[4];
  while (std::fread(header, 1, 4, stdin) == 4) {
    const uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) |
                          (static_cast<uint32_t>(header[3]) << 24);
    std::string text(size, '\0');
    if (size > 0 && std::fread(text.data(), 1, size, stdin) != size) return 1;
    if (check_cuts) {
      std::cout << CheckCuts(*tokenizer, text, most) << "\n";
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
