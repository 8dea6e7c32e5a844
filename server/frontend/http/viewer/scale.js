// Value ranges and colour scales of maps. A scale is {diverging, low, high}:
//   - diverging [-m, m], m = max(|min|, |max|): for kinds that are signed by construction
//     (signed rollout, PLuG gates, differential attention) and for any map with a negative
//     value, so zero is always the neutral centre;
//   - otherwise sequential: [0, max] ("from zero", the default, as the server's PNGs), or
//     [min, max] ("stretch") unless the map is near-flat, which is never stretched.
// A scale shared by several maps is the scale of the union of their ranges.

// Spread (max - min) under this fraction of the magnitude max(|min|, |max|): near-flat.
export const NEAR_FLAT_SPREAD = 0.02;

// {min, max, finite, nonFinite} of the finite values (min = max = 0 when there are none).
export function rangeOf(values) {
  let min = Infinity;
  let max = -Infinity;
  let finite = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) continue;
    finite++;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (finite === 0) return {min: 0, max: 0, finite: 0, nonFinite: values.length};
  return {min, max, finite, nonFinite: values.length - finite};
}

export function unionOf(ranges) {
  const seen = ranges.filter((r) => r.finite > 0);
  if (seen.length === 0) return {min: 0, max: 0, finite: 0, nonFinite: 0};
  return {
    min: Math.min(...seen.map((r) => r.min)),
    max: Math.max(...seen.map((r) => r.max)),
    finite: seen.reduce((n, r) => n + r.finite, 0),
    nonFinite: ranges.reduce((n, r) => n + r.nonFinite, 0),
  };
}

export function isNearFlat(range) {
  if (range.finite === 0) return false;
  const magnitude = Math.max(Math.abs(range.min), Math.abs(range.max));
  return magnitude === 0 || range.max - range.min <= NEAR_FLAT_SPREAD * magnitude;
}

// The scale for `range`. signed: the map's kind is signed by construction. stretch:
// sequential scales span [min, max] instead of [0, max].
export function scaleFor(range, {signed = false, stretch = false} = {}) {
  if (signed || range.min < 0) {
    const m = Math.max(Math.abs(range.min), Math.abs(range.max));
    return {diverging: true, low: -(m || 1), high: m || 1};
  }
  if (stretch && !isNearFlat(range) && range.max > range.min) {
    return {diverging: false, low: range.min, high: range.max};
  }
  return {diverging: false, low: 0, high: range.max > 0 ? range.max : 1};
}

// Where `v` sits on `scale`, clipped to [0, 1].
export function positionOn(v, scale) {
  const t = (v - scale.low) / (scale.high - scale.low);
  return Math.min(1, Math.max(0, t));
}

// `v` with 3 significant digits, compactly: "0", "0.0412", "-0.196", "4.3e-5", "1.23e+4".
export function formatNumber(v) {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e-3 && a < 1e4) return String(Number(v.toPrecision(3)));
  const [mantissa, exponent] = v.toExponential(2).split("e");
  return `${Number(mantissa)}e${exponent}`;
}
