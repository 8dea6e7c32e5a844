// The panel of a text classifier: top-k predictions (Predict), and from one Explain call
// the text as the model read it, shaded piece by piece by the attention rollout, the class
// token's attention of the chosen layer and head, and (DGT) the M-DGSA gate; a note when
// the model read only the first max_tokens pieces.
import * as api from "./api.js";
import {
  classifierExplainFields,
  classifierSpecs,
  classifierStart,
  decodeClassifierMaps,
  headline,
  predictBesideExplain,
} from "./classification.js";
import {el} from "./dom.js";
import {rangeOf} from "./scale.js";
import {textTile} from "./tile.js";

// input: {kind: "text", text, base64 (its UTF-8 bytes), codePoints (Array.from(text))}.
export async function openTextClassifier(model, input, changed) {
  const start = classifierStart(model);
  const {cfg, signedAttention, frame, view} = start;
  let found = {}; // the decoded maps and pieces of the last Explain answer

  async function fetchMaps() {
    const explained = await api.explain(model.name, {
      text: input.base64,
      ...classifierExplainFields(start, true), // text models lead with a class token
    });
    const read = explained.text || {};
    found = {
      ...decodeClassifierMaps(explained),
      tokens: read.tokens || [],
      charsRead: read.chars_read || 0,
      truncated: Boolean(read.truncated),
    };
  }

  const classes = await predictBesideExplain(
    model,
    start,
    {text: input.base64},
    fetchMaps,
    changed,
  );
  const readLine = el("p", {className: "summary-line read"});
  frame.summary.append(readLine); // after the top-k list

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

  // The class token's row [1, T + 1] without its own key: one value per piece.
  const pieceValues = (row) => row.data.subarray(1, 1 + found.tokens.length);
  const over = "class token over the pieces \u00B7 ";
  const specs = () => classifierSpecs(found, view, signedAttention, spec, pieceValues, over);

  function render(mapSpecs, scaleOf) {
    readLine.textContent = found.truncated
      ? `read the first ${found.tokens.length} pieces, ${found.charsRead} of ` +
        `${input.codePoints.length} characters (max_tokens ` +
        `${cfg.text ? cfg.text.max_tokens : "?"}); the rest, unshaded, was not read`
      : `read all ${found.tokens.length} pieces`;
    const ctx = {headline: headline(model, classes)};
    frame.tiles.replaceChildren(...mapSpecs.map((s) => textTile(s, scaleOf(s), ctx)));
  }

  return {root: frame.root, specs, render};
}
