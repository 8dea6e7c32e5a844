// Tiles: one picture each (the input, a map over it, a mask, detections), its colour bar
// or legend beside it, and under it the panel's prediction and the map's own range.
//
// A map spec (what panels return from specs()) is
//   {key, kind, title, detail, values: Float32Array, w, h, signed, overlay, cover?, marks?,
//    onPick?, range?}
// detail: a second title line (layer, head, ...); range: rangeOf(values) if known;
// values: row-major h x w; kind: maps of one kind share a scale when scales are shared;
// signed: the kind is signed by construction (diverging scale even without negatives);
// overlay: drawn over the input image (else alone, e.g. a layers x heads grid); cover:
// {width, height} in image pixels that the grid spans from the top left (default the whole
// image); marks(svg, sx, sy): extra SVG drawn in display pixels (sx, sy per image pixel);
// onPick(y, x): a click on the picture at image pixel (y, x).
import {el, svgEl} from "./dom.js";
import {NON_FINITE_RGB, tableFor} from "./colour.js";
import {formatNumber, isNearFlat, positionOn, rangeOf} from "./scale.js";

// The longest side of a picture, in CSS pixels.
export const PICTURE_SIZE = 208;

// Display size of a width x height picture fitted into PICTURE_SIZE.
export function fitted(width, height) {
  const s = PICTURE_SIZE / Math.max(width, height);
  return {width: Math.round(width * s), height: Math.round(height * s)};
}

// A tile's frame: title, a row for the picture and what goes beside it, and a foot with
// the panel's headline (predicted label and score).
function frame(title, detail, kind, headline) {
  const body = el("div", {className: "tile-body"});
  const foot = el(
    "div",
    {className: "tile-foot"},
    el("div", {className: "headline", text: headline}),
  );
  const root = el(
    "figure",
    {className: "tile", dataset: {kind}},
    el(
      "figcaption",
      {className: "tile-title"},
      title,
      el("span", {className: "detail", text: detail || ""}),
    ),
    body,
    foot,
  );
  return {root, body, foot};
}

// The stacked picture: `width` x `height` source pixels shown at a fitted size, the image
// (if given) at the bottom, then `layers` canvases, then an SVG for marks.
function picture(width, height, image) {
  const size = fitted(width, height);
  const stack = el("div", {className: "stack"});
  stack.style.width = `${size.width}px`;
  stack.style.height = `${size.height}px`;
  if (image) {
    const base = el("canvas", {className: "base"});
    base.width = image.width;
    base.height = image.height;
    base.getContext("2d").drawImage(image.bitmap, 0, 0);
    stack.append(base);
  }
  const svg = svgEl("svg", {
    class: "marks",
    width: size.width,
    height: size.height,
    viewBox: `0 0 ${size.width} ${size.height}`,
  });
  return {stack, svg, size, sx: size.width / width, sy: size.height / height};
}

// Paints `values` (h x w) onto `canvas` at one pixel per value.
function paintMap(canvas, values, w, h, scale) {
  canvas.width = w;
  canvas.height = h;
  const context = canvas.getContext("2d");
  const pixels = context.createImageData(w, h);
  const table = tableFor(scale);
  const out = pixels.data;
  for (let i = 0; i < w * h; i++) {
    const v = values[i];
    const rgb = Number.isFinite(v) ? table : NON_FINITE_RGB;
    const k = Number.isFinite(v) ? Math.round(positionOn(v, scale) * 255) * 3 : 0;
    out[i * 4] = rgb[k];
    out[i * 4 + 1] = rgb[k + 1];
    out[i * 4 + 2] = rgb[k + 2];
    out[i * 4 + 3] = 255;
  }
  context.putImageData(pixels, 0, 0);
}

// The vertical colour bar of `scale`, `height` CSS pixels, with the scale's ends (and 0 on
// a diverging scale) printed beside it and the map's own min and max marked by arrows.
// Its data attributes carry the numbers (low, high: the scale; min, max: the map).
export function colourBar(scale, range, height, kind) {
  const bar = el("canvas", {className: "strip"});
  bar.width = 1;
  bar.height = 256;
  const context = bar.getContext("2d");
  const pixels = context.createImageData(1, 256);
  const table = tableFor(scale);
  for (let i = 0; i < 256; i++) {
    const k = (255 - i) * 3; // high values at the top
    pixels.data.set([table[k], table[k + 1], table[k + 2], 255], i * 4);
  }
  context.putImageData(pixels, 0, 0);
  const root = el("div", {
    className: "colourbar",
    dataset: {
      kind,
      low: scale.low,
      high: scale.high,
      min: range.min,
      max: range.max,
      diverging: scale.diverging ? "true" : "false",
    },
  });
  root.style.height = `${height}px`;
  const at = (v) => `${(1 - positionOn(v, scale)) * 100}%`;
  const label = (v, cls) => {
    const node = el("span", {className: `bar-label ${cls}`, text: formatNumber(v)});
    node.style.top = at(v);
    return node;
  };
  root.append(bar, label(scale.high, "high"), label(scale.low, "low"));
  if (scale.diverging) {
    const tick = el("span", {className: "bar-zero"});
    tick.style.top = at(0);
    root.append(tick, label(0, "zero"));
  }
  if (range.finite > 0) {
    for (const [v, cls, what] of [
      [range.max, "data-max", "map maximum"],
      [range.min, "data-min", "map minimum"],
    ]) {
      const arrow = el("span", {
        className: `bar-mark ${cls}`,
        text: "\u25B8",
        title: `${what} ${formatNumber(v)}`,
      });
      arrow.style.top = at(v);
      root.append(arrow);
    }
  }
  return root;
}

// A map tile (see the spec above) on `scale`. ctx: {image, headline}.
export function mapTile(spec, scale, ctx) {
  const range = spec.range || rangeOf(spec.values);
  const {root, body, foot} = frame(spec.title, spec.detail, spec.kind, ctx.headline);
  root.dataset.key = spec.key;
  const overlay = spec.overlay && ctx.image;
  const pic = overlay
    ? picture(ctx.image.width, ctx.image.height, ctx.image)
    : picture(spec.w, spec.h, null);
  const map = el("canvas", {
    className: overlay ? "map overlay" : "map",
    dataset: {kind: spec.kind, key: spec.key},
  });
  paintMap(map, spec.values, spec.w, spec.h, scale);
  const cover = overlay
    ? spec.cover || {width: ctx.image.width, height: ctx.image.height}
    : {width: spec.w, height: spec.h};
  map.style.width = `${cover.width * pic.sx}px`;
  map.style.height = `${cover.height * pic.sy}px`;
  pic.stack.append(map, pic.svg);
  if (spec.marks) spec.marks(pic.svg, pic.sx, pic.sy);
  if (spec.onPick && overlay) pickable(pic, spec.onPick);
  const flat = isNearFlat(range);
  if (flat) {
    pic.stack.append(
      el("div", {
        className: "flat-badge",
        text: `near-flat: all \u2248 ${formatNumber((range.min + range.max) / 2)}`,
      }),
    );
  }
  body.append(pic.stack, colourBar(scale, range, pic.size.height, spec.kind));
  foot.append(rangeLine(range));
  return root;
}

// The line under a map: its own range, whether it is near-flat, and how many values are
// not finite.
function rangeLine(range) {
  const flat = isNearFlat(range);
  let text =
    range.finite > 0
      ? `values ${formatNumber(range.min)} \u2026 ${formatNumber(range.max)}`
      : "no finite values";
  if (flat) text += ` (near-flat: spread ${formatNumber(range.max - range.min)})`;
  if (range.nonFinite > 0) text += `, ${range.nonFinite} not finite (grey)`;
  return el("div", {className: flat ? "range flat" : "range", text});
}

// The height of a text tile's colour bar, in CSS pixels.
const TEXT_BAR_HEIGHT = 80;

// A text map tile: the text as the model read it, each piece shaded by its value on
// `scale`, with the colour bar beside it. The spec is a map spec whose values run over
// `spec.pieces` ([{text, piece, id}]: the characters of the request a piece came from (may
// be none), the piece and its vocabulary id) and whose `unread` is the text past the
// model's last piece (drawn unshaded). ctx: {headline}.
export function textTile(spec, scale, ctx) {
  const range = spec.range || rangeOf(spec.values);
  const {root, body, foot} = frame(spec.title, spec.detail, spec.kind, ctx.headline);
  root.dataset.key = spec.key;
  root.classList.add("text-tile");
  const table = tableFor(scale);
  const shaded = el("p", {className: "pieces", dataset: {kind: spec.kind, key: spec.key}});
  spec.pieces.forEach((p, i) => {
    const v = spec.values[i];
    // A piece that covers no characters (the leading bytes of a character spelled in byte
    // pieces, or one the tokenizer inserted) is a narrow coloured mark.
    const span = el("span", {
      className: p.text ? "piece" : "piece empty",
      text: p.text,
      title: `${p.piece} (id ${p.id}): ${formatNumber(v)}`,
      dataset: {index: i, value: v},
    });
    let rgb = NON_FINITE_RGB;
    if (Number.isFinite(v)) {
      const k = Math.round(positionOn(v, scale) * 255) * 3;
      rgb = [table[k], table[k + 1], table[k + 2]];
    }
    span.style.backgroundColor = `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`;
    // Dark ink on light colours, light ink on dark ones (Rec. 601 luma).
    const light = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 140;
    span.classList.add(light ? "on-light" : "on-dark");
    shaded.append(span);
  });
  if (spec.unread) shaded.append(el("span", {className: "unread", text: spec.unread}));
  body.append(shaded, colourBar(scale, range, TEXT_BAR_HEIGHT, spec.kind));
  foot.append(rangeLine(range)); // says "near-flat" when the map is
  return root;
}

// Calls onPick(y, x) with the image pixel under a click.
function pickable(pic, onPick) {
  pic.stack.classList.add("pickable");
  pic.stack.addEventListener("click", (event) => {
    const box = pic.stack.getBoundingClientRect();
    const x = Math.floor((event.clientX - box.left) / pic.sx);
    const y = Math.floor((event.clientY - box.top) / pic.sy);
    onPick(y, x);
  });
}

// A tile of the input image itself, with optional marks, a click handler and something
// beside it (a legend or a list). ctx: {image, headline}.
export function imageTile({title, detail, kind, marks, onPick, side, overlayCanvas}, ctx) {
  const {root, body} = frame(title, detail, kind, ctx.headline);
  const pic = picture(ctx.image.width, ctx.image.height, ctx.image);
  if (overlayCanvas) {
    overlayCanvas.classList.add("overlay");
    overlayCanvas.style.width = "100%";
    overlayCanvas.style.height = "100%";
    pic.stack.append(overlayCanvas);
  }
  pic.stack.append(pic.svg);
  if (marks) marks(pic.svg, pic.sx, pic.sy);
  if (onPick) pickable(pic, onPick);
  body.append(pic.stack);
  if (side) body.append(side);
  return root;
}

// A crosshair at image pixel (y, x), for the query pixel of segmentation maps.
export function crosshair(svg, sx, sy, y, x) {
  const cx = (x + 0.5) * sx;
  const cy = (y + 0.5) * sy;
  for (const [colour, width] of [
    ["#000000", 4],
    ["#ffffff", 2],
  ]) {
    svg.append(
      svgEl("circle", {cx, cy, r: 6, fill: "none", stroke: colour, "stroke-width": width}),
    );
    svg.append(
      svgEl("line", {
        x1: cx - 11,
        y1: cy,
        x2: cx + 11,
        y2: cy,
        stroke: colour,
        "stroke-width": width / 2,
      }),
    );
    svg.append(
      svgEl("line", {
        x1: cx,
        y1: cy - 11,
        x2: cx,
        y2: cy + 11,
        stroke: colour,
        "stroke-width": width / 2,
      }),
    );
  }
}
