// The panel of a text classifier: top-k predictions (Predict), and from one Explain call
// the text as the model read it, shaded piece by piece by the attention rollout, the class
// token's attention of the chosen layer and head, and (DGT) the M-DGSA gate; a note when
// the model read only the first max_tokens pieces.
import * as api from "./api.js";
import {
  TOP_K,
  appendViewControls,
  headName,
  initialView,
  pickHead,
  topKList,
} from "./classification.js";
import {el, range} from "./dom.js";
import {panelFrame} from "./panel.js";
import {formatNumber, rangeOf} from "./scale.js";
import {decodeTensor} from "./tensor.js";
import {textTile} from "./tile.js";

// input: {kind: "text", text, base64 (its UTF-8 bytes), codePoints (Array.from(text))}.
export async function openTextClassifier(model, input, changed) {
  const cfg = model.config;
  const maps = new Set(cfg.maps || []);
  const layers = cfg.layers || 0;
  // M-DGSA (g A+ - (1-g) A-) and differential attention (A1 - lambda A2) are signed.
  const signedAttention = maps.has("gate") || /diff/.test(cfg.arch || "");
  const view = initialView(cfg);
  const frame = panelFrame(model);
  let found = {}; // the decoded maps and pieces of the last Explain answer

  async function fetchMaps() {
    const explained = await api.explain(model.name, {
      text: input.base64,
      top_k: TOP_K,
      rollout: true,
      rollout_options: {signed_maps: view.signedMaps},
      attention_layers: range(layers),
      attention_queries: [0],
      gates: maps.has("gate"),
    });
    const read = explained.text || {};
    found = {
      rollout: decodeTensor(explained.rollout),
      attention: (explained.attention || []).map(decodeTensor),
      gates: (explained.gates || []).map(decodeTensor),
      tokens: read.tokens || [],
      tokenCount: read.token_count || 0,
      truncated: Boolean(read.truncated),
    };
  }

  const [predicted] = await Promise.all([
    api.predict(model.name, {text: input.base64, top_k: TOP_K}),
    fetchMaps(),
  ]);
  const classes = predicted.classes || [];
  frame.summary.append(topKList(classes));
  const readLine = el("p", {className: "summary-line read"});
  frame.summary.append(readLine);
  appendViewControls(frame, cfg, view, fetchMaps, changed);
  frame.setState("done");

  // The request's characters behind each piece, and the text after the last piece read.
  const pieces = () =>
    found.tokens.map((t) => ({
      text: input.codePoints.slice(t.begin || 0, t.end || 0).join(""),
      piece: t.piece,
      id: t.id || 0,
    }));
  const unread = () => {
    const last = found.tokens.length ? found.tokens[found.tokens.length - 1].end || 0 : 0;
    return found.truncated ? input.codePoints.slice(last).join("") : "";
  };
  const spec = (key, kind, title, detail, values, signed) => ({
    key,
    kind,
    title,
    detail,
    values,
    signed,
    range: rangeOf(values),
    pieces: pieces(),
    unread: unread(),
  });

  function specs() {
    const out = [];
    const l = view.layer;
    const count = found.tokens.length;
    if (found.rollout) {
      out.push(
        spec(
          "rollout",
          "rollout",
          "Attention rollout",
          `class token over the pieces \u00B7 signed maps: ${view.signedMaps}`,
          found.rollout.data,
          view.signedMaps === "raw",
        ),
      );
    }
    if (found.attention[l]) {
      // [heads, 1, T + 1] -> the class token's row without its own key.
      const row = pickHead(view, found.attention[l]).data.subarray(1, 1 + count);
      out.push(
        spec(
          "attention",
          "attention",
          "Class-token attention",
          `layer ${l} \u00B7 ${headName(view)}`,
          row,
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
          `layer ${l} \u00B7 ${headName(view)}`,
          pickHead(view, found.gates[l]).data,
          false,
        ),
      );
    }
    return out;
  }

  function render(mapSpecs, scaleOf) {
    const top = classes[0];
    const headline = top ? `${model.name}: ${top.label} ${formatNumber(top.probability)}` : model.name;
    readLine.textContent = found.truncated
      ? `read the first ${found.tokens.length} of ${found.tokenCount} pieces ` +
        `(max_tokens ${cfg.text ? cfg.text.max_tokens : "?"}); the rest, unshaded, was not read`
      : `read all ${found.tokenCount} pieces`;
    frame.tiles.replaceChildren(...mapSpecs.map((s) => textTile(s, scaleOf(s), {headline})));
  }

  return {root: frame.root, specs, render};
}
