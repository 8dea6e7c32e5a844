// Colour tables of the viewer. Maps follow the project's picture rules (docs/viewer.md):
// viridis (perceptually uniform) for non-negative maps, a blue - light grey - red diverging
// table centred on zero for signed ones (the same end and centre colours as the server's
// heatmap PNGs), and distinct categorical colours for classes and detections.

// Viridis at 0, 0.1, ..., 1; the table interpolates linearly between them in sRGB.
const VIRIDIS_STOPS = [
  "#440154",
  "#482576",
  "#414487",
  "#34608d",
  "#2a788e",
  "#21918c",
  "#22a884",
  "#44bf70",
  "#7ad151",
  "#bddf26",
  "#fde725",
];
// Diverging: cool blue at -1, neutral grey at 0, warm red at +1, linear on each half.
const DIVERGING_STOPS = ["#3b4cc0", "#dddddd", "#b40426"];

function rgbOf(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

// 256 RGB triples (Uint8ClampedArray of 768) spanning `stops` evenly.
function tableOf(stops) {
  const rgb = stops.map(rgbOf);
  const out = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = (i / 255) * (rgb.length - 1);
    const k = Math.min(Math.floor(t), rgb.length - 2);
    const f = t - k;
    for (let c = 0; c < 3; c++)
      out[i * 3 + c] = Math.round(rgb[k][c] + (rgb[k + 1][c] - rgb[k][c]) * f);
  }
  return out;
}

const TABLES = {sequential: tableOf(VIRIDIS_STOPS), diverging: tableOf(DIVERGING_STOPS)};

// The 256-entry table of a scale (see scale.js).
export function tableFor(scale) {
  return scale.diverging ? TABLES.diverging : TABLES.sequential;
}

// Grey for values that are not finite (never scaled).
export const NON_FINITE_RGB = [128, 128, 128];

// Categorical colours (classes of a mask, detections), chosen to stay apart from each other
// and readable on grey images; index 0 of a mask is drawn transparent by the caller when
// it is the background.
const CATEGORICAL = [
  "#e6194b",
  "#3cb44b",
  "#ffe119",
  "#4363d8",
  "#f58231",
  "#911eb4",
  "#42d4f4",
  "#f032e6",
  "#bfef45",
  "#fabed4",
  "#469990",
  "#dcbeff",
  "#9a6324",
  "#fffac8",
  "#800000",
  "#aaffc3",
  "#808000",
  "#ffd8b1",
  "#000075",
  "#a9a9a9",
];

export function categoricalHex(i) {
  return CATEGORICAL[((i % CATEGORICAL.length) + CATEGORICAL.length) % CATEGORICAL.length];
}

export function categoricalRgb(i) {
  return rgbOf(categoricalHex(i));
}

// Black or white, whichever reads better on `hex`.
export function textColourOn(hex) {
  const [r, g, b] = rgbOf(hex);
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? "#000000" : "#ffffff";
}
