// gatescope-client: command-line client of the gatescope.v1 API.
//
//   gatescope-client predict|explain|models|health|services [FLAGS] [FILE...]
//   gatescope-client COMMAND --help      every flag, its range and its default
//
// This file is the only one that reads the command line: it fills the plain option structs
// of options.h and runs the command (commands.h). Output per command: see its --help and
// commands.h; the files written per task: client/tasks/.
//
// Why CLI11 (Debian's libcli11-dev, header-only): it has subcommands with their own --help
// listing defaults, typed values with range checks, comma lists through its delimiter
// support, and it refuses an unknown flag instead of taking it as a value. absl::flags
// (the server's) has neither subcommands nor positional inputs, getopt_long has no types,
// and the hand-written parser this replaced accepted typos and bad values silently.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "client/cli_checks.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/options.h"

namespace gatescope::client {
namespace {

constexpr char kFooter[] =
    "Exit status: 0 done; 1 the command could not run (e.g. no output directory); 2 a usage "
    "error (reason on stderr) or an input that failed (its error line on stdout); 3 (health) "
    "not SERVING.";

constexpr char kPredictOutput[] =
    "Prints one JSON line per input, in order: classifiers {\"file\",\"label\",\"score\","
    "\"topk\"}; text models {\"file\",\"label\",\"score\",\"topk\",\"tokens\","
    "\"truncated\"}; segmentation {\"file\",\"height\",\"width\",\"class_pixels\"} (--out: "
    "mask.png, mask_raw.png); detection {\"file\",\"detections\"} (--out: boxes.png); a "
    "failed input {\"file\",\"error\":{\"code\",\"message\"}}. With --out and several "
    "inputs the file names are prefixed with <input file name>.";

constexpr char kExplainOutput[] =
    "Writes under --out and prints one JSON line per input naming the files: classifiers "
    "<file name>.panel.png, .json, .npy maps (.rollout.png with --rollout); text models "
    "<name>.html (the text shaded by rollout, gate heatmaps), .gates.png, .json, .npy maps; "
    "segmentation "
    "mask.png, gates.png, query_attention.png and .npy maps; detection sampling_points.png, "
    "encoder_plug_gates.png and .npy maps; --compare <file name>.compare.png (text models: "
    "<name>.compare.html). Every --out "
    "gets run.json (model, version, options, server, time, every output) and index.html "
    "(the pictures with captions); an --out holding an earlier run.json is refused unless "
    "--overwrite.";

// The inputs of predict and explain: --image FILE, then the positional FILEs; or the texts
// of a text model: the --text values, then the --text-file files.
struct InputFlags {
  std::string image;
  std::vector<std::string> files;
  std::vector<std::string> texts, text_files;

  std::vector<std::string> All() const {
    std::vector<std::string> all = files;
    if (!image.empty()) all.insert(all.begin(), image);
    return all;
  }

  std::vector<TextArg> Texts() const {
    std::vector<TextArg> out;
    for (size_t i = 0; i < texts.size(); ++i) {
      out.push_back({"text" + std::to_string(i + 1), "", texts[i]});
    }
    for (const std::string& path : text_files) {
      out.push_back({path == "-" ? "stdin" : path, path, ""});
    }
    return out;
  }

  // Fills a command's inputs: the texts and their names, or the files.
  template <typename Options>
  void Fill(Options& o) const {
    o.texts = Texts();
    o.files.clear();
    for (const TextArg& t : o.texts) o.files.push_back(t.name);
    if (o.texts.empty()) o.files = All();
  }
};

// Image inputs and text inputs exclude each other: what to add `excludes` to.
struct InputOptions {
  CLI::Option* text = nullptr;
  CLI::Option* text_file = nullptr;
};

// --version, --timeout-ms; the model flag itself differs per command.
void AddTarget(CLI::App& cmd, ModelTarget& target) {
  cmd.add_option("--version", target.version, "model version (default: the newest ready one)");
  cmd.add_option("--timeout-ms", target.timeout_ms, "deadline of each call, in milliseconds")
      ->check(IntegerIn(1, 3600000));
}

InputOptions AddInputs(CLI::App& cmd, InputFlags& inputs) {
  CLI::Option_group* group =
      cmd.add_option_group("inputs", "at least one input: image files, or texts (text models)");
  CLI::Option* image =
      group->add_option("--image", inputs.image, "an input file, taken before the FILEs");
  CLI::Option* files =
      group->add_option("FILE", inputs.files, "input files (PNG/JPEG, or raw with --raw-shape)")
          ->default_str("");
  InputOptions text;
  text.text = group
                  ->add_option("--text", inputs.texts,
                               "text models: a text to send, UTF-8 (repeatable; named text1, "
                               "text2, ...; --text=VALUE for a text starting with -)")
                  ->allow_extra_args(false)
                  ->default_str("");
  text.text_file = group
                       ->add_option("--text-file", inputs.text_files,
                                    "text models: a UTF-8 file sent whole as one text "
                                    "(repeatable; - reads standard input), after the --texts")
                       ->allow_extra_args(false)
                       ->default_str("");
  for (CLI::Option* t : {text.text, text.text_file}) {
    t->excludes(image);
    t->excludes(files);
  }
  group->require_option(1, 0);
  return text;
}

void AddDetection(CLI::App& cmd, DetectionFlags& flags) {
  cmd.add_option_function<float>(
         "--score-threshold", [&flags](float v) { flags.score_threshold = v; },
         "detection models: lowest score kept (default: the model's)")
      ->check(NumberIn(0, 1, /*hi_open=*/true));
  cmd.add_option("--max-detections", flags.max_detections,
                 "detection models: most detections per image (default: the model's)")
      ->check(IntegerIn(1, 10000))
      ->default_str("");
}

void AddPredict(CLI::App& cmd, PredictOptions& o, InputFlags& inputs) {
  AddTarget(cmd, o.target);
  cmd.add_option("--model", o.target.model, "model name")->required();
  cmd.add_option("--top-k", o.top_k, "classifiers: classes per input")->check(IntegerIn(1, 1000));
  CLI::Option* raw_shape =
      AddList(cmd, "--raw-shape", o.raw_shape, "send FILEs as raw tensors of this shape (C,H,W)")
          ->check(IntegerIn(1, 65536));
  cmd.add_option("--raw-dtype", o.raw_dtype, "element type of raw tensors")
      ->check(CLI::IsMember({"uint8", "float32"}))
      ->needs(raw_shape);
  CLI::Option* out = cmd.add_option("--out", o.out_dir,
                                    "segmentation/detection: write pictures to this directory");
  cmd.add_flag("--overwrite", o.run.overwrite,
               "write into an --out that holds an earlier run's run.json");
  cmd.add_flag("--probabilities", o.probabilities,
               "segmentation: also write probabilities.npy [classes, H, W]")
      ->needs(out);
  AddDetection(cmd, o.detection);
  const InputOptions text = AddInputs(cmd, inputs);
  raw_shape->excludes(text.text);
  raw_shape->excludes(text.text_file);
}

void AddRolloutFlags(CLI::App& cmd, RolloutFlags& r) {
  cmd.add_option("--head-fusion", r.head_fusion, "rollout: how heads are fused")
      ->check(CLI::IsMember({"mean", "max", "min"}))
      ->default_str("mean");
  cmd.add_option("--signed", r.signed_maps,
                 "rollout: signed maps (M-DGSA): drop negative weights, take |w| or keep them")
      ->check(CLI::IsMember({"clamp", "abs", "raw"}))
      ->default_str("clamp");
  cmd.add_option("--discard-ratio", r.discard_ratio,
                 "rollout: fraction of each row's smallest weights dropped")
      ->check(NumberIn(0, 1, /*hi_open=*/true));
  cmd.add_option("--start-layer", r.start_layer, "rollout: first layer multiplied in")
      ->check(IntegerIn(0, 4096));
}

void AddExplainMaps(CLI::App& cmd, ExplainOptions& o) {
  cmd.add_flag("--rollout", o.rollout, "classifiers: attention rollout (and its overlay PNG)");
  cmd.add_flag("--gates", o.gates, "gate maps per layer (M-DGSA) or per stage (GDLA)");
  cmd.add_flag("--resonance", o.resonance, "DAR models: resonance and vigilance maps");
  cmd.add_flag("--plug-gates", o.plug_gates, "PLuG models: gate rows (detection: gates)");
  AddList(cmd, "--layers", o.layers, "classifiers: also the attention maps of these layers")
      ->check(IntegerIn(0, 4096));
  AddList(cmd, "--heads", o.heads, "restrict --layers maps to these heads")
      ->check(IntegerIn(0, 4096));
  AddList(cmd, "--queries", o.queries, "restrict --layers / --plug-gates rows to these tokens")
      ->check(IntegerIn(0, 1 << 20));
  cmd.add_option_function<std::vector<int>>(
         "--query",
         [&o](const std::vector<int>& yx) {
           if (yx.size() != 2) throw CLI::ValidationError("--query", "wants Y,X (two integers)");
           o.query = QueryPoint{yx[0], yx[1]};
         },
         "segmentation: attention of the input pixel at row Y, column X (Y,X)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(IntegerIn(0, 65535));
}

void AddExplain(CLI::App& cmd, ExplainOptions& o, std::string& format, InputFlags& inputs) {
  o.target.timeout_ms = 60000;
  AddTarget(cmd, o.target);
  CLI::Option_group* which = cmd.add_option_group("model", "one model, or models to compare");
  which->add_option("--model", o.target.model, "model name");
  CLI::Option* compare = AddList(
      *which, "--compare", o.compare,
      "<stem>.compare.png: models of one task side by side (MODEL1,MODEL2,...): classifiers' "
      "rollouts; segmenters' masks and query attention per stage with their difference; "
      "detectors' boxes and sampling points");
  which->require_option(1);
  cmd.add_option("--gt", o.gt,
                 "with --compare and one input: ground truth, a PNG of class indices "
                 "(segmentation: Dice per model) or a CSV of boxes x1,y1,x2,y2[,label] "
                 "(detection: boxes found)")
      ->needs(compare)
      ->check(CLI::ExistingFile);
  AddExplainMaps(cmd, o);
  AddRolloutFlags(cmd, o.rollout_flags);
  cmd.add_option("--format", format,
                 "classifiers and text models: maps as .npy files, or all in <stem>.json")
      ->check(CLI::IsMember({"npy", "json"}));
  cmd.add_option("--out", o.out_dir, "directory for the pictures and maps")->required();
  cmd.add_flag("--overwrite", o.run.overwrite,
               "write into an --out that holds an earlier run's run.json");
  cmd.add_option_function<std::string>(
         "--scale",
         [&o](const std::string& name) { o.scale = *ParseScaleMode(name); },
         "colour scales: one per kind of map across layers, stages and compared models "
         "(shared), or one per tile")
      ->check(CLI::IsMember({"shared", "tile"}))
      ->default_str("shared");
  AddDetection(cmd, o.detection);
  AddInputs(cmd, inputs);
}

int Run(int argc, char** argv) {
  CLI::App app{"gatescope-client: predict, explain and inspect models on a gatescope server",
               "gatescope-client"};
  app.option_defaults()->always_capture_default();
  // Not require_subcommand(1): CLI11 would then report a misspelled command as a missing
  // one instead of naming it.
  app.require_subcommand(0, 1);
  app.callback([&app] {
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A command");
  });
  app.footer(kFooter);
  PredictOptions predict;
  ExplainOptions explain;
  HealthOptions health;
  InputFlags inputs;
  ConnectionOptions connection;  // every command's; only one command is parsed
  std::string format = "npy";
  CLI::App* predict_cmd = app.add_subcommand("predict", "classes, masks or boxes of each input");
  AddConnectionFlags(*predict_cmd, connection);
  AddPredict(*predict_cmd, predict, inputs);
  predict_cmd->footer(std::string(kPredictOutput) + "\n\n" + kFooter);
  CLI::App* explain_cmd =
      app.add_subcommand("explain", "explanation maps of each input, written under --out");
  AddConnectionFlags(*explain_cmd, connection);
  AddExplain(*explain_cmd, explain, format, inputs);
  explain_cmd->footer(std::string(kExplainOutput) + "\n\n" + kFooter);
  CLI::App* models_cmd = app.add_subcommand("models", "list the served models");
  AddConnectionFlags(*models_cmd, connection);
  CLI::App* health_cmd = app.add_subcommand("health", "gRPC health of the server or a model");
  AddConnectionFlags(*health_cmd, connection);
  health_cmd->add_option("--service", health.service, "model name (default: the server)");
  CLI::App* services_cmd = app.add_subcommand("services", "list services (server reflection)");
  AddConnectionFlags(*services_cmd, connection);
  if (std::optional<int> exit = ParseCommandLine(app, argc, argv)) return *exit;
  if (std::count(inputs.text_files.begin(), inputs.text_files.end(), "-") > 1) {
    return UsageError(app, "--text-file -: standard input can be read once");
  }
  const absl::StatusOr<Connection> server = OpenConnection(connection);
  if (!server.ok()) return UsageError(app, std::string(server.status().message()));

  RunFlags run;
  run.command_line.assign(argv, argv + argc);
  run.server = connection.server;
  absl::StatusOr<ExitCode> result;
  if (predict_cmd->parsed()) {
    run.overwrite = predict.run.overwrite;
    run.command = "predict";
    predict.run = run;
    inputs.Fill(predict);
    result = RunPredict(*server, predict);
  } else if (explain_cmd->parsed()) {
    run.overwrite = explain.run.overwrite;
    run.command = "explain";
    explain.run = run;
    inputs.Fill(explain);
    explain.json_maps = format == "json";
    result = RunExplain(*server, explain);
  } else if (models_cmd->parsed()) {
    result = RunModels(*server);
  } else if (health_cmd->parsed()) {
    result = RunHealth(*server, health);
  } else {
    result = RunServices(*server);
  }
  if (result.ok()) return static_cast<int>(*result);
  std::cerr << "gatescope-client " << app.get_subcommands().front()->get_name() << ": "
            << result.status().message() << "\n";
  return 1;
}

}  // namespace
}  // namespace gatescope::client

int main(int argc, char** argv) { return gatescope::client::Run(argc, argv); }
