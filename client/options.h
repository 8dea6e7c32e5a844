// Plain option structs of gatescope-client's commands. main.cc, the only place that reads
// the command line, fills them; the commands only read them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/scale_mode.h"

namespace gatescope::client {

inline constexpr char kDefaultServer[] = "127.0.0.1:8001";

// Environment variable holding the default of --token-file.
inline constexpr char kTokenFileEnv[] = "GATESCOPE_TOKEN_FILE";

// How to reach the server, as given on the command line (no file read yet): an insecure
// channel unless tls_ca is set. OpenConnection (connection.h) checks the combination and
// reads the files.
struct ConnectionOptions {
  std::string server = kDefaultServer;
  std::string tls_ca;           // PEM root certificates that verify the server; empty: no TLS
  std::string tls_cert;         // PEM client certificate (mutual TLS), with tls_key and tls_ca
  std::string tls_key;          // PEM private key of tls_cert
  std::string tls_server_name;  // name checked against the server's certificate; empty: host
  std::string token_file;       // bearer token sent on every call; empty: none
};

// The model a command talks to and how long one call may take.
struct ModelTarget {
  std::string model;
  std::string version;  // empty: the highest ready version
  int timeout_ms = 30000;
};

// Detection settings of a request; unset values leave the model's defaults.
struct DetectionFlags {
  std::optional<float> score_threshold;
  int max_detections = 0;  // 0: the model's
};

// Rollout settings of an explain request; empty / zero values leave the server's defaults
// (mean, clamp, 0, 0), since segmentation and detection models refuse rollout settings.
struct RolloutFlags {
  std::string head_fusion;
  std::string signed_maps;
  double discard_ratio = 0;
  int start_layer = 0;
};

// A pixel of the input as sent: row y, column x.
struct QueryPoint {
  int y = 0;
  int x = 0;
};

// A text input of a text model ("text_classification"): --text VALUE or --text-file PATH.
struct TextArg {
  std::string name;   // in output lines and output file names: "text<i>" (the i-th --text,
                      // from 1), the path as given for a file, "stdin" for "-"
  std::string path;   // --text-file: the file to read ("-": standard input); empty: `value`
  std::string value;  // --text: the text itself (UTF-8)
};

// How a command that writes files was run, for its run record (run_record.h); main()
// fills it.
struct RunFlags {
  std::string command;                    // "predict" | "explain"
  std::vector<std::string> command_line;  // argv as given: the exact options
  std::string server;                     // as given to --server
  bool overwrite = false;                 // --overwrite: reuse a directory of an earlier run
  absl::Time started = absl::Now();
};

struct PredictOptions {
  ModelTarget target;
  int top_k = 5;
  std::vector<int64_t> raw_shape;   // empty: the files are encoded images
  std::string raw_dtype = "uint8";  // uint8 | float32, with raw_shape
  std::string out_dir;              // empty: print only
  bool probabilities = false;       // segmentation, with out_dir
  DetectionFlags detection;
  // The inputs' names: --image first, then the positional files; with `texts`, their names.
  std::vector<std::string> files;
  std::vector<TextArg> texts;  // text inputs (--text, then --text-file); never with images
  RunFlags run;
};

struct ExplainOptions {
  ModelTarget target;                // target.model empty when comparing
  std::vector<std::string> compare;  // models whose rollouts are compared
  bool rollout = false, gates = false, resonance = false, plug_gates = false;
  std::vector<int> layers, heads, queries;
  std::optional<QueryPoint> query;  // segmentation
  RolloutFlags rollout_flags;
  bool json_maps = false;  // --format json: every map in <stem>.json instead of .npy files
  ScaleMode scale = ScaleMode::kShared;  // --scale: one colour scale per kind of map, or per tile
  std::string gt;  // --gt with --compare: a label PNG (segmentation) or boxes CSV (detection)
  std::string out_dir;
  DetectionFlags detection;
  std::vector<std::string> files;  // as PredictOptions::files
  std::vector<TextArg> texts;      // as PredictOptions::texts
  RunFlags run;
};

struct HealthOptions {
  std::string service;  // empty: the server as a whole
};

}  // namespace gatescope::client
