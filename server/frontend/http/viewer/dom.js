// Small DOM helpers. Styles are set through the CSSOM (el.style), never as attributes: the
// page's Content-Security-Policy allows no inline style attributes.

const SVG_NS = "http://www.w3.org/2000/svg";

// <tag> with `props` (className, text, title, dataset: {...}, any other attribute) and
// children (nodes or strings).
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (key === "className") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

// An SVG element with attributes (numbers allowed).
export function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A labelled <select> named `name` of `options` ([value, text] pairs) calling
// onChange(value as a string, the select).
export function selectControl(label, options, value, onChange, name) {
  const select = el("select", {name});
  for (const [v, text] of options) {
    const option = el("option", {value: String(v), text});
    if (String(v) === String(value)) option.selected = true;
    select.append(option);
  }
  select.addEventListener("change", () => onChange(select.value, select));
  return el("label", {className: "control"}, `${label} `, select);
}

// [0, 1, ..., n - 1]
export function range(n) {
  return Array.from({length: n}, (_, i) => i);
}
