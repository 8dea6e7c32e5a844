// The panel of a segmentation model: one Explain call gives the class mask (drawn in class
// colours over the input, with a legend of pixel shares), per decoder stage the gate map
// (models with "gate" maps) and the attention of the token under the query pixel over the
// stage's tokens. A click on the input, mask or a map moves the query pixel.
import * as api from "./api.js";
import {categoricalHex, categoricalRgb} from "./colour.js";
import {el, range, selectControl} from "./dom.js";
import {panelFrame, refetch} from "./panel.js";
import {rangeOf} from "./scale.js";
import {decodeTensor} from "./tensor.js";
import {crosshair, imageTile, mapTile} from "./tile.js";

const MASK_ALPHA = 150; // of 255, over the input

// Whether class `i` named `label` is the background (left uncoloured in the overlay).
const isBackground = (label, i) => i === 0 && /background/i.test(label || "");

export async function openSegmenter(model, image, changed) {
  const cfg = model.config;
  const labels = cfg.labels || [];
  const maps = new Set(cfg.maps || []);
  const stages = cfg.layers || 0;
  // Stage 0, the coarsest, first: its maps vary the most.
  const state = {
    stage: 0,
    query: {y: Math.floor(image.height / 2), x: Math.floor(image.width / 2)},
  };
  const withQuery = maps.has("attention");
  const frame = panelFrame(model);
  let found = {}; // the decoded mask and maps of the last Explain answer

  async function fetchMaps() {
    const explained = await api.explain(model.name, {
      image: image.base64,
      gates: maps.has("gate"),
      query_pixel: withQuery ? state.query : undefined,
    });
    const seg = explained.segmentation || {};
    found = {
      mask: decodeTensor(seg.mask),
      pixels: (seg.class_pixels || []).map(Number),
      gates: (explained.gates || []).map(decodeTensor),
      query: (explained.query_attention || []).map(decodeTensor),
    };
  }

  async function moveQuery(y, x) {
    if (!withQuery) return;
    const previous = state.query;
    state.query = {
      y: Math.min(Math.max(y, 0), image.height - 1),
      x: Math.min(Math.max(x, 0), image.width - 1),
    };
    await refetch(frame, fetchMaps, () => {
      state.query = previous;
    });
    summarize();
    changed();
  }

  await fetchMaps();

  // The legend beside the mask (class colour, name, share of pixels) and the summary line.
  let legend = null;
  function summarize() {
    const total = found.pixels.reduce((a, b) => a + b, 0) || 1;
    legend = el("ul", {className: "legend"});
    labels.forEach((label, i) => {
      const swatch = el("span", {
        className: isBackground(label, i) ? "swatch background" : "swatch",
      });
      if (!isBackground(label, i)) swatch.style.background = categoricalHex(i);
      legend.append(
        el(
          "li",
          {dataset: {index: i}},
          swatch,
          el("span", {className: "label", text: label}),
          el("span", {
            className: "score",
            text: `${((100 * (found.pixels[i] || 0)) / total).toFixed(1)} %`,
          }),
        ),
      );
    });
    const where = withQuery ? ` \u00B7 query pixel (y ${state.query.y}, x ${state.query.x})` : "";
    frame.summary.replaceChildren(
      el("p", {
        className: "summary-line",
        text: `${image.width}\u00D7${image.height} px \u00B7 ${labels.length} classes${where}`,
      }),
    );
  }
  summarize();

  const stageName = (s) => {
    const t = found.gates[s] || found.query[s];
    return t ? `stage ${s} (${t.shape[0]}\u00D7${t.shape[1]})` : `stage ${s}`;
  };
  if (stages > 0) {
    frame.controls.append(
      selectControl(
        "Decoder stage",
        range(stages).map((s) => [s, stageName(s)]),
        state.stage,
        (v) => {
          state.stage = Number(v);
          changed();
        },
        "stage",
      ),
    );
  }
  if (withQuery) {
    frame.controls.append(
      el("span", {className: "hint", text: "click a picture to move the query pixel"}),
    );
  }
  frame.setState("done");

  // The headline: the largest class other than the background, with its pixel share.
  function headline() {
    const total = found.pixels.reduce((a, b) => a + b, 0) || 1;
    let best = -1;
    found.pixels.forEach((n, i) => {
      if (!isBackground(labels[i], i) && (best < 0 || n > found.pixels[best])) best = i;
    });
    if (best < 0) return model.name;
    const share = ((100 * found.pixels[best]) / total).toFixed(1);
    return `${model.name}: ${labels[best]} (${share} % of pixels)`;
  }

  const mark = (svg, sx, sy) => crosshair(svg, sx, sy, state.query.y, state.query.x);
  const marks = withQuery ? mark : undefined;
  const onPick = withQuery ? moveQuery : undefined;

  function specs() {
    const out = [];
    const s = state.stage;
    const grid = (t) => ({values: t.data, w: t.shape[1], h: t.shape[0], range: rangeOf(t.data)});
    if (found.gates[s]) {
      out.push({
        key: "gate",
        kind: "stage_gate",
        title: "GDLA gate",
        detail: `decoder ${stageName(s)}`,
        signed: false,
        overlay: true,
        ...grid(found.gates[s]),
        marks,
        onPick,
      });
    }
    if (found.query[s]) {
      out.push({
        key: "query",
        kind: "query_attention",
        title: "Query-pixel attention",
        detail: `decoder ${stageName(s)} \u00B7 pixel (${state.query.y}, ${state.query.x})`,
        signed: true,
        overlay: true,
        ...grid(found.query[s]),
        marks,
        onPick,
      });
    }
    return out;
  }

  // The mask as an RGBA canvas at the mask's size.
  function maskCanvas() {
    const mask = found.mask;
    const canvas = el("canvas", {className: "mask", dataset: {kind: "mask"}});
    if (!mask) return canvas;
    const [h, w] = mask.shape;
    canvas.width = w;
    canvas.height = h;
    const context = canvas.getContext("2d");
    const pixels = context.createImageData(w, h);
    const colours = labels.map((label, i) => (isBackground(label, i) ? null : categoricalRgb(i)));
    for (let i = 0; i < w * h; i++) {
      const c = colours[mask.data[i]];
      if (!c) continue;
      pixels.data.set([c[0], c[1], c[2], MASK_ALPHA], i * 4);
    }
    context.putImageData(pixels, 0, 0);
    return canvas;
  }

  function render(mapSpecs, scaleOf) {
    const ctx = {image, headline: headline()};
    frame.tiles.replaceChildren(
      imageTile(
        {
          title: "Input",
          detail: `${image.width}\u00D7${image.height} px`,
          kind: "input",
          marks,
          onPick,
        },
        ctx,
      ),
      imageTile(
        {
          title: "Class mask",
          detail: "share of pixels per class",
          kind: "mask",
          overlayCanvas: maskCanvas(),
          side: legend,
          marks,
          onPick,
        },
        ctx,
      ),
      ...mapSpecs.map((s) => mapTile(s, scaleOf(s), ctx)),
    );
  }

  return {root: frame.root, specs, render};
}
