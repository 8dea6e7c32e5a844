// The frame every model's panel shares: a header (model, task, architecture), a summary
// (predictions, legend or detections), a row of controls, the tiles, and a place for
// errors. `state` (data-state) is "running", "done", "error" or "skipped", for people and
// tests.
import {el} from "./dom.js";

const TASK_NAMES = {
  image_classification: "image classification",
  image_segmentation: "segmentation",
  object_detection: "object detection",
  text_classification: "text classification",
};

export function taskName(task) {
  return TASK_NAMES[task] || task || "unknown task";
}

export function panelFrame(model) {
  const cfg = model.config;
  const summary = el("div", {className: "summary"});
  const controls = el("div", {className: "controls"});
  const tiles = el("div", {className: "tiles"});
  const error = el("div", {className: "panel-error", role: "alert"});
  const root = el(
    "section",
    {className: "panel", dataset: {model: model.name, task: cfg.task || "", state: "running"}},
    el(
      "header",
      {className: "panel-head"},
      el("h2", {text: model.name}),
      el("span", {
        className: "task",
        text: `${taskName(cfg.task)} \u00B7 ${cfg.arch || "?"} \u00B7 v${model.version}`,
      }),
    ),
    summary,
    controls,
    error,
    tiles,
  );
  return {
    root,
    summary,
    controls,
    tiles,
    setState(state, message = "") {
      root.dataset.state = state;
      error.textContent = message;
    },
  };
}

// Runs `fetch` (another Explain call) with the panel marked running. On failure the panel
// shows the error and `undo` restores the settings that match the maps it still holds.
export async function refetch(frame, fetch, undo) {
  frame.setState("running");
  try {
    await fetch();
    frame.setState("done");
  } catch (e) {
    undo();
    frame.setState("error", e.message);
  }
}

// A panel for a model the viewer cannot show (unknown task) or whose call failed.
export function errorPanel(model, message) {
  const frame = panelFrame(model);
  frame.setState("error", message);
  return {root: frame.root, specs: () => [], render() {}};
}

// A panel for a model that was not run because it reads another kind of input (state
// "skipped": not a failure).
export function skippedPanel(model, message) {
  const frame = panelFrame(model);
  frame.setState("skipped", message);
  return {root: frame.root, specs: () => [], render() {}};
}
