// What the image and the text classifier panels share: their start (configuration, view,
// frame), Predict beside the first Explain, the top-k list (Predict's classes with bars),
// the layer / head / signed-map controls, the headline, and picking one head (or the
// mean) out of a per-head map.
import * as api from "./api.js";
import {el, range, selectControl} from "./dom.js";
import {panelFrame, refetch} from "./panel.js";
import {formatNumber} from "./scale.js";
import {at, decodeTensor, meanOverFirst} from "./tensor.js";

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

// What a classifier panel starts from: the model's configuration, its map kinds and layer
// count, whether its attention is signed, the view settings and the panel's frame.
export function classifierStart(model) {
  const cfg = model.config;
  const maps = new Set(cfg.maps || []);
  return {
    cfg,
    maps,
    layers: cfg.layers || 0,
    // M-DGSA (g A+ - (1-g) A-) and differential attention (A1 - lambda A2) are signed.
    signedAttention: maps.has("gate") || /diff/.test(cfg.arch || ""),
    view: initialView(cfg),
    frame: panelFrame(model),
  };
}

// Predict of `input` (the request's input field: {image} or {text}) beside the first
// Explain (fetchMaps); then the top-k list and the view controls in the frame, which is
// marked done. Returns Predict's classes.
export async function predictBesideExplain(model, start, input, fetchMaps, changed) {
  const [predicted] = await Promise.all([
    api.predict(model.name, {...input, top_k: TOP_K}),
    fetchMaps(),
  ]);
  const classes = predicted.classes || [];
  start.frame.summary.append(topKList(classes));
  appendViewControls(start.frame, start.cfg, start.view, fetchMaps, changed);
  start.frame.setState("done");
  return classes;
}

// The Explain fields both classifier panels ask for: top-k, the rollout read as the view
// says, the class token's attention in every layer (when the model has a class token) and
// the M-DGSA gates (when it has them).
export function classifierExplainFields(start, classToken) {
  return {
    top_k: TOP_K,
    rollout: true,
    rollout_options: {signed_maps: start.view.signedMaps},
    attention_layers: classToken ? range(start.layers) : [],
    attention_queries: classToken ? [0] : [],
    gates: start.maps.has("gate"),
  };
}

// The maps of those fields in an Explain answer, decoded: {rollout, attention, gates}.
export function decodeClassifierMaps(explained) {
  return {
    rollout: decodeTensor(explained.rollout),
    attention: (explained.attention || []).map(decodeTensor),
    gates: (explained.gates || []).map(decodeTensor),
  };
}

// The specs both classifier panels show, in order: the attention rollout, the class
// token's attention of the view's layer and head, and the M-DGSA gate of that layer and
// head, from the decoded Explain answer `found` ({rollout, attention, gates}); those it
// lacks are left out. `spec(key, kind, title, detail, values, signed)` makes a panel's map
// spec; `classRow(t)` turns the chosen head's class-token attention [1, keys] into the
// values the panel draws; `over` names what the rollout runs over.
export function classifierSpecs(found, view, signedAttention, spec, classRow, over) {
  const out = [];
  const l = view.layer;
  const detail = `layer ${l} \u00B7 ${headName(view)}`;
  if (found.rollout) {
    out.push(
      spec(
        "rollout",
        "rollout",
        "Attention rollout",
        `${over}signed maps: ${view.signedMaps}`,
        found.rollout.data,
        view.signedMaps === "raw",
      ),
    );
  }
  if (found.attention[l]) {
    const row = classRow(pickHead(view, found.attention[l]));
    out.push(spec("attention", "attention", "Class-token attention", detail, row, signedAttention));
  }
  if (found.gates[l]) {
    const gate = pickHead(view, found.gates[l]).data;
    out.push(spec("gates", "gate", "M-DGSA gate", detail, gate, false));
  }
  return out;
}

// The line under every tile: the model, its top class and probability.
export function headline(model, classes) {
  const top = classes[0];
  return top ? `${model.name}: ${top.label} ${formatNumber(top.probability)}` : model.name;
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
