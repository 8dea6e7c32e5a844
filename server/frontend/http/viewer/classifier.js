// The panel of an image classifier: top-k predictions (Predict), and from one Explain
// call the rollout, the class token's attention, and where the model has them, M-DGSA
// gates, DAR resonance and vigilance, and PLuG gates; one layer and head at a time
// (mean over heads by default).
import * as api from "./api.js";
import {
  classifierExplainFields,
  classifierSpecs,
  classifierStart,
  decodeClassifierMaps,
  headName,
  headline,
  pickHead,
  predictBesideExplain,
} from "./classification.js";
import {rangeOf} from "./scale.js";
import {at, decodeTensor} from "./tensor.js";
import {imageTile, mapTile} from "./tile.js";

export async function openClassifier(model, image, changed) {
  const start = classifierStart(model);
  const {cfg, maps, signedAttention, frame} = start;
  const state = start.view;
  const [gh, gw] = cfg.token_grid || [0, 0];
  const first = cfg.cls_token ? 1 : 0; // patch tokens follow the class token
  let found = {}; // the decoded maps of the last Explain answer

  async function fetchMaps() {
    const explained = await api.explain(model.name, {
      image: image.base64,
      ...classifierExplainFields(start, Boolean(cfg.cls_token)),
      resonance: maps.has("resonance"),
      plug_gates: maps.has("plug_gate") && cfg.cls_token,
    });
    found = {
      ...decodeClassifierMaps(explained),
      resonance: (explained.resonance || []).map(decodeTensor),
      plug: (explained.plug_gates || []).map(decodeTensor),
      vigilance: decodeTensor(explained.vigilance),
    };
  }

  const classes = await predictBesideExplain(
    model,
    start,
    {image: image.base64},
    fetchMaps,
    changed,
  );

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
    const l = state.layer;
    const out = classifierSpecs(found, state, signedAttention, spec, patches, "");
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
    const ctx = {image, headline: headline(model, classes)};
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
