// Tokenizes texts with the server's TextTokenizer, for the Python/server parity test
// (tests/integration/test_text.py): the same class the text task uses, without a model
// pass per text.
//
// Usage: tokenize_texts TOKENIZER_MODEL MAX_TOKENS < texts
// stdin: texts, each as a little-endian uint32 byte length and its bytes. stdout:
// "words_encode_alone 0|1" (TextTokenizer::words_encode_alone), then one line per text,
// "<pieces read> <truncated 0|1> <bytes encoded> id:begin:end ..." (code point offsets),
// or "ERROR <status>" for a text the server refuses.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "server/preprocess/text_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tokenize_texts TOKENIZER_MODEL MAX_TOKENS < texts\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream model;
  model << in.rdbuf();
  gatescope::TextConfig config;
  config.set_tokenizer("sentencepiece");
  config.set_tokenizer_file(argv[1]);
  config.set_max_tokens(std::stoi(argv[2]));
  config.set_overflow("truncate");
  config.set_max_text_bytes(int64_t{1} << 30);
  config.set_pad_id(0);
  auto tokenizer = gatescope::TextTokenizer::Create(model.str(), config);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  std::ios::sync_with_stdio(false);
  std::cout << "words_encode_alone " << ((*tokenizer)->words_encode_alone() ? 1 : 0) << "\n";
  unsigned char header[4];
  while (std::fread(header, 1, 4, stdin) == 4) {
    const uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) |
                          (static_cast<uint32_t>(header[3]) << 24);
    std::string text(size, '\0');
    if (size > 0 && std::fread(text.data(), 1, size, stdin) != size) return 1;
    auto tokens = (*tokenizer)->Tokenize(text);
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
