// The viewer page: picks models, takes an image (file picker or drop) for image models or
// typed text for text models, opens one panel per model (two in compare mode) and draws
// every panel's maps on per-tile or shared scales.
// The results element's data-state says "idle", "running", "done" or "error", and its
// data-run counts the analyses finished (for people and tests to wait on).
import * as api from "./api.js";
import {openClassifier} from "./classifier.js";
import {openDetector} from "./detector.js";
import {el} from "./dom.js";
import {errorPanel, skippedPanel} from "./panel.js";
import {rangeOf, scaleFor, unionOf} from "./scale.js";
import {openSegmenter} from "./segmenter.js";
import {base64FromBytes} from "./tensor.js";
import {openTextClassifier} from "./text.js";

// By task: what the model reads and the panel that shows it.
const OPENERS = {
  image_classification: {input: "image", open: openClassifier},
  image_segmentation: {input: "image", open: openSegmenter},
  object_detection: {input: "image", open: openDetector},
  text_classification: {input: "text", open: openTextClassifier},
};

const $ = (id) => document.getElementById(id);
const ui = {
  model: $("model"),
  compare: $("compare"),
  model2: $("model2"),
  scale: $("scale"),
  stretch: $("stretch"),
  opacity: $("opacity"),
  token: $("token"),
  file: $("file"),
  drop: $("drop"),
  textForm: $("text-form"),
  text: $("text"),
  preview: $("preview"),
  status: $("status"),
  results: $("results"),
};
// inputs: the last image and the last text given, each kept while the other is used.
const state = {models: [], inputs: {image: null, text: null}, panels: [], run: 0};

function setStatus(text, isError = false) {
  ui.status.textContent = text;
  ui.status.classList.toggle("error", isError);
}

const modelNamed = (name) => state.models.find((m) => m.name === name);
const inputOf = (model) => OPENERS[model.config.task].input;

// Shows the input the first model reads: the image drop zone or the text box.
function showInput() {
  const model = modelNamed(ui.model.value);
  const kind = model ? inputOf(model) : "image";
  ui.drop.hidden = kind !== "image";
  ui.preview.hidden = kind !== "image" || !state.inputs.image;
  ui.textForm.hidden = kind !== "text";
}

function askForInput(kind) {
  setStatus(
    kind === "text"
      ? "type or paste text and press Analyse (Ctrl+Enter)"
      : "choose or drop an image",
  );
}

function fillModelSelect(select, keep) {
  select.replaceChildren(
    ...state.models.map((m) =>
      el("option", {value: m.name, text: m.name, title: m.config.task || ""}),
    ),
  );
  if (keep && modelNamed(keep)) select.value = keep;
}

async function loadModels() {
  setStatus("loading models\u2026");
  try {
    state.models = (await api.readyModels()).filter((m) => OPENERS[m.config.task]);
  } catch (e) {
    state.models = [];
    setStatus(
      e.status === 401 || e.status === 403 ? `${e.message} \u2014 enter a token` : e.message,
      true,
    );
    fillModelSelect(ui.model);
    fillModelSelect(ui.model2);
    showInput();
    return;
  }
  const first = sessionStorage.getItem("gatescope.model") || "";
  const second = sessionStorage.getItem("gatescope.model2") || "";
  fillModelSelect(ui.model, first);
  fillModelSelect(ui.model2, second);
  if (!modelNamed(second) && state.models.length > 1) {
    // Another model of the first one's task, if any.
    const task = modelNamed(ui.model.value).config.task;
    const other =
      state.models.find((m) => m.name !== ui.model.value && m.config.task === task) ||
      state.models.find((m) => m.name !== ui.model.value);
    ui.model2.value = other.name;
  }
  showInput();
  setStatus(
    state.models.length
      ? `${state.models.length} models ready \u2014 choose or drop an image, or pick a ` +
          "text model and type text"
      : "no ready models",
    state.models.length === 0,
  );
}

// The input: its bytes (base64, as sent) and a bitmap for drawing.
async function takeFile(file) {
  if (!file) return;
  let bitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch {
    setStatus(`${file.name}: not an image this browser can read`, true);
    return;
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (ui.preview.src) URL.revokeObjectURL(ui.preview.src);
  ui.preview.src = URL.createObjectURL(file);
  ui.preview.hidden = false;
  state.inputs.image = {
    kind: "image",
    name: file.name,
    base64: base64FromBytes(bytes),
    bitmap,
    width: bitmap.width,
    height: bitmap.height,
  };
  analyse();
}

// Takes the text in the box as the text input and analyses it (an empty box only gets a
// status). Switching models later re-analyses this text, not later edits of the box.
function takeText() {
  const text = ui.text.value;
  if (text.trim() === "") {
    setStatus("the text is empty", true);
    return;
  }
  state.inputs.text = {
    kind: "text",
    text,
    base64: base64FromBytes(new TextEncoder().encode(text)),
    codePoints: Array.from(text), // the server's piece offsets count code points
  };
  analyse();
}

const describe = (input) =>
  input.kind === "text"
    ? `text (${input.codePoints.length} characters)`
    : `${input.name} (${input.width}\u00D7${input.height})`;

// Opens the panels of the chosen model(s) for the input the first one reads. A second
// model that reads another kind of input gets a panel saying so.
async function analyse() {
  showInput();
  const first = modelNamed(ui.model.value);
  if (!first) return;
  const kind = inputOf(first);
  const input = state.inputs[kind];
  if (!input) {
    // Nothing to show for this model yet: drop the other input's panels (and any analysis
    // still running for them) and ask.
    ++state.run;
    state.panels = [];
    ui.results.replaceChildren();
    ui.results.dataset.state = "idle";
    askForInput(kind);
    return;
  }
  const run = ++state.run;
  const names = [ui.model.value];
  if (ui.compare.checked && modelNamed(ui.model2.value)) names.push(ui.model2.value);
  ui.results.dataset.state = "running";
  ui.results.classList.toggle("compare", names.length > 1);
  const what = describe(input);
  setStatus(`${what}: running ${names.join(" and ")}\u2026`);
  const panels = await Promise.all(
    names.map(async (name) => {
      const model = modelNamed(name);
      const opener = OPENERS[model.config.task];
      if (opener.input !== kind) {
        return skippedPanel(model, `this model reads ${opener.input}, and the input is ${kind}`);
      }
      try {
        return await opener.open(model, input, render);
      } catch (e) {
        return errorPanel(model, e.message);
      }
    }),
  );
  if (run !== state.run) return; // a newer image or model took over
  state.panels = panels;
  ui.results.replaceChildren(...panels.map((p) => p.root));
  render();
  const count = (s) => panels.filter((p) => p.root.dataset.state === s).length;
  const failed = count("error");
  const skipped = count("skipped");
  ui.results.dataset.run = String(run);
  ui.results.dataset.state = failed > 0 && failed + skipped === panels.length ? "error" : "done";
  let outcome = failed ? `${failed} of ${panels.length} models failed` : "done";
  if (skipped) outcome += ` (${skipped} reads another kind of input)`;
  setStatus(`${what}: ${outcome}`, failed > 0);
}

// Draws every panel. Shared scales: one scale per kind of map over all panels' current maps.
function render() {
  const stretch = ui.stretch.checked;
  const specs = state.panels.map((p) => p.specs());
  const shared = new Map();
  if (ui.scale.value === "shared") {
    const groups = new Map();
    for (const s of specs.flat()) {
      if (!groups.has(s.kind)) groups.set(s.kind, []);
      groups.get(s.kind).push(s);
    }
    for (const [kind, group] of groups) {
      shared.set(
        kind,
        scaleFor(unionOf(group.map((s) => s.range || rangeOf(s.values))), {
          signed: group.some((s) => s.signed),
          stretch,
        }),
      );
    }
  }
  const scaleOf = (s) =>
    shared.get(s.kind) || scaleFor(s.range || rangeOf(s.values), {signed: s.signed, stretch});
  state.panels.forEach((p, i) => p.render(specs[i], scaleOf));
}

function setOpacity() {
  document.documentElement.style.setProperty("--overlay", String(Number(ui.opacity.value) / 100));
}

function wire() {
  ui.token.value = api.storedToken();
  const applyToken = () => {
    if (ui.token.value.trim() === api.storedToken()) return;
    api.storeToken(ui.token.value.trim());
    loadModels().then(analyse);
  };
  ui.token.addEventListener("change", applyToken);
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault(); // Enter applies the token; nothing is submitted
    applyToken();
  });
  ui.model.addEventListener("change", () => {
    sessionStorage.setItem("gatescope.model", ui.model.value);
    analyse();
  });
  ui.model2.addEventListener("change", () => {
    sessionStorage.setItem("gatescope.model2", ui.model2.value);
    if (ui.compare.checked) analyse();
  });
  ui.compare.addEventListener("change", () => {
    ui.model2.disabled = !ui.compare.checked;
    analyse();
  });
  ui.scale.addEventListener("change", render);
  ui.stretch.addEventListener("change", render);
  ui.opacity.addEventListener("input", setOpacity);
  ui.file.addEventListener("change", () => takeFile(ui.file.files[0]));
  ui.textForm.addEventListener("submit", (event) => {
    event.preventDefault(); // the text is analysed here; nothing is submitted
    takeText();
  });
  ui.text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      takeText();
    }
  });
  for (const type of ["dragenter", "dragover"]) {
    ui.drop.addEventListener(type, (event) => {
      event.preventDefault();
      ui.drop.classList.add("over");
    });
  }
  ui.drop.addEventListener("dragleave", () => ui.drop.classList.remove("over"));
  ui.drop.addEventListener("drop", (event) => {
    event.preventDefault();
    ui.drop.classList.remove("over");
    takeFile(event.dataTransfer.files[0]);
  });
  // A file dropped anywhere else would make the browser leave the page.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
  ui.model2.disabled = !ui.compare.checked;
  setOpacity();
}

wire();
loadModels();
