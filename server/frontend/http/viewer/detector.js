// The panel of a detection model: one Explain call gives the detections (boxes with
// numbered badges placed so that they do not cover each other, and the list beside them)
// and per detection the decoder's sampling points and attention weights; PLuG models also
// give the decoder's gate per head and level and the encoder's gate maps over the image.
import * as api from "./api.js";
import {categoricalHex, textColourOn} from "./colour.js";
import {el, range, selectControl, svgEl} from "./dom.js";
import {panelFrame, refetch} from "./panel.js";
import {formatNumber, rangeOf} from "./scale.js";
import {at, decodeTensor, meanOverFirst} from "./tensor.js";
import {imageTile, mapTile} from "./tile.js";

const MAX_DETECTIONS = 10;
const THRESHOLDS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7];
// Colours of the feature levels (finest first) for one detection's sampling points.
const LEVEL_COLOURS = ["#ffe119", "#f58231", "#e6194b", "#911eb4", "#4363d8", "#42d4f4"];
const BADGE = {width: 18, height: 15};

export async function openDetector(model, image, changed) {
  const cfg = model.config;
  const det = cfg.detection || {};
  const maps = new Set(cfg.maps || []);
  const plug = maps.has("plug_gate");
  const strides = det.level_strides || [];
  const state = {
    selected: "all",
    layer: Math.max(0, (det.decoder_layers || 1) - 1),
    encoderLayer: Math.max(0, (det.encoder_layers || 1) - 1),
    level: 0,
    head: "mean",
    threshold: det.score_threshold || 0.3,
  };
  const frame = panelFrame(model);
  let found = {detections: [], maps: [], encoder: []}; // the last Explain answer, decoded

  async function fetchMaps() {
    const explained = await api.explain(model.name, {
      image: image.base64,
      plug_gates: plug,
      score_threshold: state.threshold,
      max_detections: MAX_DETECTIONS,
    });
    found = {
      detections: explained.detections || [],
      maps: (explained.detection_maps || []).map((m) => ({
        points: decodeTensor(m.sampling_points),
        weights: decodeTensor(m.attention_weights),
        gate: decodeTensor(m.plug_gate),
      })),
      encoder: (explained.encoder_plug_gates || []).map(decodeTensor),
    };
    if (state.selected !== "all" && state.selected >= found.detections.length)
      state.selected = "all";
  }
  await fetchMaps();

  const colour = (i) => categoricalHex(i);
  const chosen = () =>
    state.selected === "all" ? range(found.detections.length) : [state.selected];
  const detectionName = (i) => {
    const d = found.detections[i];
    return `#${i + 1} ${d.label} ${formatNumber(d.score)}`;
  };

  // Controls; the detection list depends on the answer, so controls are rebuilt with it.
  function buildControls() {
    const set = (key, explainAgain) => async (value) => {
      const previous = state[key];
      state[key] = value === "all" || value === "mean" ? value : Number(value);
      if (explainAgain) {
        await refetch(frame, fetchMaps, () => {
          state[key] = previous;
        });
        buildControls();
      }
      changed();
    };
    const levels = det.levels || 0;
    const items = [
      selectControl(
        "Min score",
        THRESHOLDS.concat(THRESHOLDS.includes(state.threshold) ? [] : [state.threshold])
          .sort((a, b) => a - b)
          .map((t) => [t, String(t)]),
        state.threshold,
        set("threshold", true),
        "threshold",
      ),
      selectControl(
        "Detection",
        [["all", "all"], ...found.detections.map((_, i) => [i, detectionName(i)])],
        state.selected,
        set("selected"),
        "detection",
      ),
      selectControl(
        "Decoder layer",
        range(det.decoder_layers || 0).map((l) => [l, `layer ${l}`]),
        state.layer,
        set("layer"),
        "layer",
      ),
    ];
    if (plug) {
      items.push(
        selectControl(
          "Encoder layer",
          range(det.encoder_layers || 0).map((l) => [l, `layer ${l}`]),
          state.encoderLayer,
          set("encoderLayer"),
          "encoderLayer",
        ),
        selectControl(
          "Token level",
          range(levels).map((k) => [k, `level ${k} (stride ${strides[k] ?? "?"})`]),
          state.level,
          set("level"),
          "level",
        ),
        selectControl(
          "Head",
          [["mean", "mean of heads"], ...range(cfg.heads || 0).map((h) => [h, `head ${h}`])],
          state.head,
          set("head"),
          "head",
        ),
      );
    }
    frame.controls.replaceChildren(...items);
  }
  buildControls();
  frame.setState("done");

  function headline() {
    const n = found.detections.length;
    if (n === 0) return `${model.name}: no detection above ${state.threshold}`;
    const top = found.detections[0];
    const count = n > 1 ? `${n} detections` : "1 detection";
    return `${model.name}: ${top.label} ${formatNumber(top.score)} (${count})`;
  }

  // Boxes with numbered badges; a badge goes to the first free place among the box's
  // corners (inside, then outside), else below the last one placed there.
  function drawBoxes(svg, sx, sy, which) {
    const placed = [];
    const free = (r) =>
      placed.every(
        (p) => r.x + r.w <= p.x || p.x + p.w <= r.x || r.y + r.h <= p.y || p.y + p.h <= r.y,
      );
    const width = Number(svg.getAttribute("width"));
    const height = Number(svg.getAttribute("height"));
    for (const i of which) {
      const d = found.detections[i];
      const x1 = d.x1 * sx,
        y1 = d.y1 * sy,
        x2 = d.x2 * sx,
        y2 = d.y2 * sy;
      for (const [stroke, w] of [
        ["#000000", 3.5],
        [colour(i), 2],
      ]) {
        svg.append(
          svgEl("rect", {
            x: x1,
            y: y1,
            width: Math.max(1, x2 - x1),
            height: Math.max(1, y2 - y1),
            fill: "none",
            stroke,
            "stroke-width": w,
          }),
        );
      }
      const clampX = (x) => Math.min(Math.max(x, 0), width - BADGE.width);
      const clampY = (y) => Math.min(Math.max(y, 0), height - BADGE.height);
      const candidates = [
        [x1, y1],
        [x1, y1 - BADGE.height],
        [x2 - BADGE.width, y1],
        [x1, y2 - BADGE.height],
        [x1, y2],
        [x2 - BADGE.width, y2 - BADGE.height],
      ].map(([x, y]) => ({x: clampX(x), y: clampY(y), w: BADGE.width, h: BADGE.height}));
      let spot = candidates.find(free);
      if (!spot) {
        spot = {...candidates[0]};
        while (!free(spot) && spot.y + BADGE.height < height) spot.y += BADGE.height + 1;
      }
      placed.push(spot);
      svg.append(
        svgEl("rect", {
          x: spot.x,
          y: spot.y,
          width: spot.w,
          height: spot.h,
          rx: 3,
          fill: colour(i),
          stroke: "#000000",
          "stroke-width": 1,
        }),
      );
      svg.append(
        svgEl(
          "text",
          {
            x: spot.x + spot.w / 2,
            y: spot.y + spot.h - 4,
            "text-anchor": "middle",
            "font-size": 11,
            "font-weight": "bold",
            fill: textColourOn(colour(i)),
          },
          String(i + 1),
        ),
      );
    }
  }

  function detectionList() {
    const list = el("ol", {className: "detections"});
    found.detections.forEach((d, i) => {
      const swatch = el("span", {className: "swatch"});
      swatch.style.background = colour(i);
      list.append(
        el(
          "li",
          {},
          swatch,
          el("span", {className: "index", text: `${i + 1}`}),
          el("span", {className: "label", text: d.label}),
          el("span", {className: "score", text: formatNumber(d.score)}),
        ),
      );
    });
    if (found.detections.length === 0)
      list.append(el("li", {className: "none", text: `none above ${state.threshold}`}));
    return list;
  }

  // Sampling points of the chosen detections in the chosen decoder layer: dot area grows
  // with the attention weight; one detection: coloured by feature level, else by detection.
  function drawPoints(svg, sx, sy) {
    const which = chosen();
    let top = 0;
    const dots = [];
    for (const i of which) {
      const m = found.maps[i];
      if (!m || !m.points) continue;
      const points = at(m.points, [state.layer]); // [heads, levels, points, 2]
      const weights = at(m.weights, [state.layer]); // [heads, levels, points]
      const [heads, levels, count] = weights.shape;
      for (let h = 0; h < heads; h++) {
        for (let k = 0; k < levels; k++) {
          for (let p = 0; p < count; p++) {
            const j = (h * levels + k) * count + p;
            const w = weights.data[j];
            top = Math.max(top, w);
            dots.push({
              x: points.data[2 * j] * sx,
              y: points.data[2 * j + 1] * sy,
              w,
              fill: which.length === 1 ? LEVEL_COLOURS[k % LEVEL_COLOURS.length] : colour(i),
            });
          }
        }
      }
    }
    dots.sort((a, b) => a.w - b.w); // the heaviest on top
    for (const d of dots) {
      svg.append(
        svgEl("circle", {
          cx: d.x,
          cy: d.y,
          r: 1.2 + 5 * Math.sqrt(d.w / (top || 1)),
          fill: d.fill,
          "fill-opacity": 0.85,
          stroke: "#000000",
          "stroke-width": 0.6,
        }),
      );
    }
    drawBoxes(svg, sx, sy, which);
  }

  // Beside the points: for one detection, each level's colour and share of attention mass.
  function levelLegend() {
    if (state.selected === "all")
      return el("p", {
        className: "hint",
        text: "dots: one colour per detection; area \u221D weight",
      });
    const m = found.maps[state.selected];
    const weights = at(m.weights, [state.layer]);
    const [heads, levels, count] = weights.shape;
    const mass = new Array(levels).fill(0);
    for (let h = 0; h < heads; h++) {
      for (let k = 0; k < levels; k++) {
        for (let p = 0; p < count; p++)
          mass[k] += weights.data[(h * levels + k) * count + p] / heads;
      }
    }
    const list = el("ul", {className: "legend"});
    mass.forEach((v, k) => {
      const swatch = el("span", {className: "swatch"});
      swatch.style.background = LEVEL_COLOURS[k % LEVEL_COLOURS.length];
      list.append(
        el(
          "li",
          {},
          swatch,
          el("span", {className: "label", text: `stride ${strides[k] ?? k}`}),
          el("span", {className: "score", text: `${(100 * v).toFixed(0)} %`}),
        ),
      );
    });
    return list;
  }

  function specs() {
    const out = [];
    const encoder = found.encoder[state.encoderLayer * (det.levels || 1) + state.level];
    if (encoder) {
      // [heads, sampled levels, h, w] -> head (or mean) -> mean over sampled levels.
      const perHead = state.head === "mean" ? meanOverFirst(encoder) : at(encoder, [state.head]);
      const grid = meanOverFirst(perHead);
      const [h, w] = grid.shape;
      const s = strides[state.level] || 1;
      out.push({
        key: "encoder_gate",
        kind: "encoder_plug_gate",
        overlay: true,
        signed: true,
        title: "Encoder PLuG gate",
        detail:
          `layer ${state.encoderLayer} \u00B7 tokens of level ${state.level} \u00B7 ` +
          `${state.head === "mean" ? "mean of heads" : `head ${state.head}`} \u00B7 ` +
          "mean of sampled levels",
        values: grid.data,
        w,
        h,
        cover: {width: w * s, height: h * s},
        range: rangeOf(grid.data),
      });
    }
    const one = state.selected === "all" ? 0 : state.selected;
    const gate = found.maps[one] && found.maps[one].gate;
    if (gate && found.detections[one]) {
      const g = at(gate, [state.layer]); // [heads, levels]
      out.push({
        key: "decoder_gate",
        kind: "decoder_plug_gate",
        overlay: false,
        signed: true,
        title: `Decoder PLuG gate of #${one + 1}`,
        detail: `layer ${state.layer} \u00B7 rows: heads, columns: levels`,
        values: g.data,
        w: g.shape[1],
        h: g.shape[0],
        range: rangeOf(g.data),
      });
    }
    return out;
  }

  function render(mapSpecs, scaleOf) {
    const ctx = {image, headline: headline()};
    const tiles = [
      imageTile(
        {
          title: "Detections",
          detail: `score above ${state.threshold}, at most ${MAX_DETECTIONS}`,
          kind: "detections",
          side: detectionList(),
          marks: (svg, sx, sy) => drawBoxes(svg, sx, sy, range(found.detections.length)),
        },
        ctx,
      ),
    ];
    if (found.maps.length > 0) {
      const who = state.selected === "all" ? "all detections" : `#${state.selected + 1}`;
      tiles.push(
        imageTile(
          {
            title: "Sampling points",
            detail: `${who} \u00B7 decoder layer ${state.layer}`,
            kind: "sampling_points",
            side: levelLegend(),
            marks: drawPoints,
          },
          ctx,
        ),
      );
    }
    frame.tiles.replaceChildren(...tiles, ...mapSpecs.map((s) => mapTile(s, scaleOf(s), ctx)));
  }

  return {root: frame.root, specs, render};
}
