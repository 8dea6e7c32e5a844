// What the image and the text classifier panels share: the top-k list (Predict's classes
// with bars), the layer / head / signed-map controls, and picking one head (or the mean)
// out of a per-head map.
import {el, range, selectControl} from "./dom.js";
import {refetch} from "./panel.js";
import {at, meanOverFirst} from "./tensor.js";

export const TOP_K = 5;

const SIGNED_MAPS = [
  ["clamp", "clamp (drop negative weight)"],
  ["abs", "abs"],
  ["raw", "raw (signed)"],
];

// The settings the controls change: the last layer, the mean of heads, clamped rollout.
export function initialView(cfg) {
  return {layer: Math.max(0, (cfg.layers || 0) - 1), head: "mean", signedMaps: "clamp"};
}

// An <ol> of the top-k classes with probability bars (the first one marked .top-label).
export function topKList(classes) {
  const list = el("ol", {className: "topk"});
  classes.forEach((c, i) => {
    const bar = el("span", {className: "bar"});
    bar.style.width = `${Math.max(0, Math.min(1, c.probability)) * 100}%`;
    list.append(
      el(
        "li",
        {className: i === 0 ? "top" : ""},
        el("span", {className: i === 0 ? "label top-label" : "label", text: c.label}),
        el("span", {className: "track"}, bar),
        el("span", {className: "score", text: c.probability.toFixed(3)}),
      ),
    );
  });
  return list;
}

// Appends Layer and Head selects (when the model has them) and the rollout's signed-map
// select to frame.controls. They change `view` in place; a signed-map change explains again
// through fetchMaps (restoring the old setting if that fails); every change ends in
// changed() so the page redraws.
export function appendViewControls(frame, cfg, view, fetchMaps, changed) {
  const control = (label, options, key, explainAgain) =>
    selectControl(
      label,
      options,
      view[key],
      async (value, select) => {
        const previous = view[key];
        view[key] = key === "signedMaps" || value === "mean" ? value : Number(value);
        if (explainAgain) {
          await refetch(frame, fetchMaps, () => {
            view[key] = previous;
            select.value = String(previous);
          });
        }
        changed();
      },
      key,
    );
  const layers = cfg.layers || 0;
  const heads = cfg.heads || 0;
  if (layers > 0)
    frame.controls.append(
      control(
        "Layer",
        range(layers).map((l) => [l, `layer ${l}`]),
        "layer",
      ),
    );
  if (heads > 0) {
    const options = [["mean", "mean of heads"], ...range(heads).map((h) => [h, `head ${h}`])];
    frame.controls.append(control("Head", options, "head"));
  }
  frame.controls.append(control("Rollout, signed maps", SIGNED_MAPS, "signedMaps", true));
}

export const headName = (view) => (view.head === "mean" ? "mean of heads" : `head ${view.head}`);

// [H, ...] -> the chosen head's map or the mean over heads.
export const pickHead = (view, t) => (view.head === "mean" ? meanOverFirst(t) : at(t, [view.head]));
