// The panel of an image classifier: top-k predictions (Predict), and from one Explain
// call the rollout, the class token's attention, and where the model has them, M-DGSA
// gates, DAR resonance and vigilance, and PLuG gates; one layer and head at a time
// (mean over heads by default).
import * as api from "./api.js";
import {
  TOP_K,
  appendViewControls,
  headName,
  initialView,
  pickHead,
  topKList,
} from "./classification.js";
import {range} from "./dom.js";
import {panelFrame} from "./panel.js";
import {rangeOf, formatNumber} from "./scale.js";
import {at, decodeTensor} from "./tensor.js";
import {imageTile, mapTile} from "./tile.js";

export async function openClassifier(model, image, changed) {
  const cfg = model.config;
  const maps = new Set(cfg.maps || []);
  const layers = cfg.layers || 0;
  const [gh, gw] = cfg.token_grid || [0, 0];
  const first = cfg.cls_token ? 1 : 0; // patch tokens follow the class token
  // M-DGSA (g A+ - (1-g) A-) and differential attention (A1 - lambda A2) are signed.
  const signedAttention = maps.has("gate") || /diff/.test(cfg.arch || "");
  const state = initialView(cfg);
  const frame = panelFrame(model);
  let found = {}; // the decoded maps of the last Explain answer

  const explainRequest = () => ({
    image: image.base64,
    top_k: TOP_K,
    rollout: true,
    rollout_options: {signed_maps: state.signedMaps},
    attention_layers: cfg.cls_token ? range(layers) : [],
    attention_queries: cfg.cls_token ? [0] : [],
    gates: maps.has("gate"),
    resonance: maps.has("resonance"),
    plug_gates: maps.has("plug_gate") && cfg.cls_token,
  });

  async function fetchMaps() {
    const explained = await api.explain(model.name, explainRequest());
    found = {
      rollout: decodeTensor(explained.rollout),
      attention: (explained.attention || []).map(decodeTensor),
      gates: (explained.gates || []).map(decodeTensor),
      resonance: (explained.resonance || []).map(decodeTensor),
      plug: (explained.plug_gates || []).map(decodeTensor),
      vigilance: decodeTensor(explained.vigilance),
    };
  }

  const [predicted] = await Promise.all([
    api.predict(model.name, {image: image.base64, top_k: TOP_K}),
    fetchMaps(),
  ]);
  const classes = predicted.classes || [];

  frame.summary.append(topKList(classes));
  appendViewControls(frame, cfg, state, fetchMaps, changed);
  frame.setState("done");

  const pick = (t) => pickHead(state, t);
  // A [1, N] or [N] token row -> its patch tokens.
  const patches = (row) => row.data.subarray(first, first + gh * gw);
  const spec = (key, kind, title, detail, values, signed) => ({
    key,
    kind,
    title,
    detail,
    values,
    w: gw,
    h: gh,
    signed,
    overlay: true,
    range: rangeOf(values),
  });

  function specs() {
    const out = [];
    const l = state.layer;
    if (found.rollout) {
      out.push(
        spec(
          "rollout",
          "rollout",
          "Attention rollout",
          `signed maps: ${state.signedMaps}`,
          found.rollout.data,
          state.signedMaps === "raw",
        ),
      );
    }
    if (found.attention[l]) {
      out.push(
        spec(
          "attention",
          "attention",
          "Class-token attention",
          `layer ${l} \u00B7 ${headName(state)}`,
          patches(pick(found.attention[l])),
          signedAttention,
        ),
      );
    }
    if (found.gates[l]) {
      out.push(
        spec(
          "gates",
          "gate",
          "M-DGSA gate",
          `layer ${l} \u00B7 ${headName(state)}`,
          pick(found.gates[l]).data,
          false,
        ),
      );
    }
    if (found.resonance[l]) {
      out.push(
        spec(
          "resonance",
          "resonance",
          "DAR resonance",
          `layer ${l} \u00B7 ${headName(state)}`,
          pick(found.resonance[l]).data,
          false,
        ),
      );
    }
    if (found.plug[l]) {
      out.push(
        spec(
          "plug",
          "plug_gate",
          "PLuG gate, class-token row",
          `layer ${l} (shared by heads)`,
          patches(at(found.plug[l], [0])),
          true,
        ),
      );
    }
    if (found.vigilance) {
      const [rows, cols] = found.vigilance.shape;
      out.push({
        key: "vigilance",
        kind: "vigilance",
        title: "Vigilance crossing",
        detail: "rows: layers, columns: heads",
        values: found.vigilance.data,
        w: cols,
        h: rows,
        signed: false,
        overlay: false,
        range: rangeOf(found.vigilance.data),
      });
    }
    return out;
  }

  function render(mapSpecs, scaleOf) {
    const top = classes[0];
    const ctx = {
      image,
      headline: top ? `${model.name}: ${top.label} ${formatNumber(top.probability)}` : model.name,
    };
    frame.tiles.replaceChildren(
      imageTile(
        {title: "Input", detail: `${image.width}\u00D7${image.height} px`, kind: "input"},
        ctx,
      ),
      ...mapSpecs.map((s) => mapTile(s, scaleOf(s), ctx)),
    );
  }

  return {root: frame.root, specs, render};
}
