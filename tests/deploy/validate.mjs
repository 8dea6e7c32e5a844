// Validates Kubernetes manifests (as JSON) against Kubernetes API schemas, two ways:
//  1. JSON schema: kubernetes-models' validators (generated from the Kubernetes OpenAPI
//     schema; @kubernetes-models/prometheus-operator for monitoring.coreos.com) check types,
//     formats, enums and required fields. They accept unknown fields, as the API's own
//     schema does.
//  2. Field names: each document is type-checked with TypeScript against the same packages'
//     declared types, so a misspelt or misplaced field (an excess property), a wrong type or
//     a missing required field is an error too. KServe's resources and the
//     prometheus-adapter configuration, for which no schema package exists, are checked
//     against schemas/kserve.ts and schemas/prometheus-adapter.ts, and the Kubernetes parts
//     embedded in KServe's resources (containers, volumes, pod fields, metadata) also by (1).
//
// stdin: {"items": [{"id": "<where it came from>", "doc": {...}, "schema": "<optional>"}]}
//   schema: absent for a Kubernetes object (chosen by apiVersion and kind), or
//   "prometheus-adapter-config" / "prometheus-adapter-helm-values".
// stdout: {"results": [{"id", "schema", "errors": ["..."]}], "versions": {...}}
// A document whose apiVersion/kind no schema covers gets an error, never a pass.
// Exit status 0 when every document was checked (errors or not), 2 on bad input.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = path.dirname(fileURLToPath(import.meta.url));

// KServe resources: the TypeScript interface in schemas/kserve.ts for each.
const KSERVE_TYPES = {
  "serving.kserve.io/v1alpha1/ServingRuntime": "IServingRuntime",
  "serving.kserve.io/v1alpha1/ClusterServingRuntime": "IServingRuntime",
  "serving.kserve.io/v1beta1/InferenceService": "IInferenceService",
};
// Keys KServe adds to a predictor (the rest are the Pod's) and to a model (the rest are a
// Container's); see schemas/kserve.ts.
const PREDICTOR_KSERVE_KEYS = [
  "name", "model", "workerSpec", "sklearn", "xgboost", "tensorflow", "pytorch", "triton",
  "onnx", "huggingface", "pmml", "lightgbm", "paddle", "minReplicas", "maxReplicas",
  "scaleTarget", "scaleMetric", "scaleMetricType", "autoScaling", "containerConcurrency",
  "timeout", "canaryTrafficPercent", "logger", "batcher", "labels", "annotations",
  "deploymentStrategy", "storageUris", "storageContainerName",
];
const MODEL_KSERVE_KEYS = [
  "modelFormat", "runtime", "storageUri", "runtimeVersion", "protocolVersion", "storage",
  "confidential",
];
const OTHER_SCHEMAS = {
  "prometheus-adapter-config": { from: "./schemas/prometheus-adapter.js", type: "IAdapterConfig" },
  "prometheus-adapter-helm-values": { from: "./schemas/prometheus-adapter.js", type: "IAdapterHelmValues" },
};

function splitApiVersion(apiVersion) {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? ["", apiVersion] : [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
}

// The module declaring apiVersion/kind, or null.
function modelModule(apiVersion, kind) {
  const [group, version] = splitApiVersion(apiVersion);
  if (!/^[A-Za-z0-9.-]*$/.test(group) || !/^v[0-9a-z]+$/.test(version) || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return null;
  }
  let spec;
  if (group === "") spec = `kubernetes-models/${version}/${kind}`;
  else if (group === "monitoring.coreos.com") spec = `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  else spec = `kubernetes-models/${group}/${version}/${kind}`;
  try {
    import.meta.resolve(spec);  // throws when the package exports no such module
  } catch {
    return null;
  }
  return spec;
}

function errorsOf(model) {
  try {
    model.validate();
    return [];
  } catch (e) {
    if (Array.isArray(e.errors)) {
      return e.errors.map((x) => `${x.instancePath || "/"} ${x.message}${x.params && x.params.allowedValues ? ` (${x.params.allowedValues.join(", ")})` : ""}`);
    }
    return [String(e.message || e)];
  }
}

async function jsonSchemaErrors(item) {
  const doc = item.doc;
  if (item.schema) return [];  // non-Kubernetes documents: TypeScript only
  const key = `${doc.apiVersion}/${doc.kind}`;
  if (KSERVE_TYPES[key]) return kserveJsonSchemaErrors(doc);
  const spec = modelModule(String(doc.apiVersion), String(doc.kind));
  if (!spec) return [];  // reported by the TypeScript half as having no schema
  const mod = await import(spec);
  const Model = mod[doc.kind];
  if (typeof Model !== "function") return [`${spec} exports no model ${doc.kind}`];
  return errorsOf(new Model(structuredClone(doc)));
}

async function kserveJsonSchemaErrors(doc) {
  const { ObjectMeta } = await import("@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta");
  const { Container } = await import("kubernetes-models/v1/Container");
  const { Volume } = await import("kubernetes-models/v1/Volume");
  const { PodSpec } = await import("kubernetes-models/v1/PodSpec");
  const errors = [];
  const at = (prefix, list) => list.forEach((e) => errors.push(`${prefix}${e}`));
  if (doc.metadata) at("/metadata", errorsOf(new ObjectMeta(structuredClone(doc.metadata))));
  const spec = doc.spec || {};
  if (doc.kind.endsWith("ServingRuntime")) {
    (spec.containers || []).forEach((c, i) => at(`/spec/containers/${i}`, errorsOf(new Container(structuredClone(c)))));
    (spec.volumes || []).forEach((v, i) => at(`/spec/volumes/${i}`, errorsOf(new Volume(structuredClone(v)))));
  } else {
    const predictor = structuredClone(spec.predictor || {});
    const pod = { containers: [] };
    for (const [k, v] of Object.entries(predictor)) if (!PREDICTOR_KSERVE_KEYS.includes(k)) pod[k] = v;
    at("/spec/predictor", errorsOf(new PodSpec(pod)));
    if (predictor.model) {
      const container = { name: "kserve-container" };
      for (const [k, v] of Object.entries(predictor.model)) if (!MODEL_KSERVE_KEYS.includes(k)) container[k] = v;
      at("/spec/predictor/model", errorsOf(new Container(container)));
    }
  }
  return errors;
}

// TypeScript: one virtual module declaring every document with its type.
function typeCheck(items) {
  const lines = [];
  const imports = [];  // {type, from, alias}
  const importType = (type, from) => {
    let found = imports.find((x) => x.type === type && x.from === from);
    if (!found) imports.push((found = { type, from, alias: `T${imports.length}` }));
    return found.alias;
  };
  const ranges = [];  // [first line, last line, index]
  const noSchema = new Map();
  const schemaNames = [];
  const body = [];
  items.forEach((item, i) => {
    const doc = item.doc;
    let alias;
    if (item.schema) {
      const s = OTHER_SCHEMAS[item.schema];
      if (!s) {
        noSchema.set(i, `unknown schema ${item.schema}`);
        schemaNames[i] = item.schema;
        return;
      }
      alias = importType(s.type, s.from);
      schemaNames[i] = `${s.type} (tests/deploy/schemas)`;
    } else if (!doc || typeof doc !== "object" || typeof doc.apiVersion !== "string" || typeof doc.kind !== "string") {
      noSchema.set(i, "not a Kubernetes object: no apiVersion and kind");
      schemaNames[i] = "none";
      return;
    } else if (KSERVE_TYPES[`${doc.apiVersion}/${doc.kind}`]) {
      alias = importType(KSERVE_TYPES[`${doc.apiVersion}/${doc.kind}`], "./schemas/kserve.js");
      schemaNames[i] = `${KSERVE_TYPES[`${doc.apiVersion}/${doc.kind}`]} (tests/deploy/schemas/kserve.ts)`;
    } else {
      const spec = modelModule(doc.apiVersion, doc.kind);
      if (!spec) {
        noSchema.set(i, `no schema for ${doc.apiVersion} ${doc.kind}`);
        schemaNames[i] = "none";
        return;
      }
      alias = importType(`I${doc.kind}`, spec);
      schemaNames[i] = spec;
    }
    const text = JSON.stringify(doc, null, 2).split("\n");
    body.push(`export const doc${i}: ${alias} = ${text[0]}`);
    const first = body.length;
    for (let j = 1; j < text.length; j++) body.push(text[j]);
    body[body.length - 1] += ";";
    ranges.push([first - 1, body.length - 1, i]);
  });
  for (const { type, from, alias } of imports) {
    lines.push(`import type { ${type} as ${alias} } from ${JSON.stringify(from)};`);
  }
  const offset = lines.length;
  const source = lines.concat(body).join("\n") + "\n";

  const virtual = path.join(here, "__manifests__.ts");
  const options = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,  // the packages' own .d.ts; schemas/*.ts are checked
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) =>
    path.resolve(name) === virtual ? ts.createSourceFile(name, source, lang, true) : getSourceFile(name, lang, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => path.resolve(name) === virtual || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (path.resolve(name) === virtual ? source : readFile(name));
  const program = ts.createProgram([virtual], options, host);

  const perItem = new Map();
  const global = [];
  const diagnostics = ts.getPreEmitDiagnostics(program);
  for (const d of diagnostics) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (!d.file) {
      global.push(message);
      continue;
    }
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    if (path.resolve(d.file.fileName) !== virtual) {
      global.push(`${path.relative(here, d.file.fileName)}:${line + 1}: ${message}`);
      continue;
    }
    const bodyLine = line - offset;
    const range = ranges.find(([a, b]) => bodyLine >= a && bodyLine <= b);
    if (!range) {
      global.push(`line ${line + 1}: ${message}`);
      continue;
    }
    const text = d.file.text.split("\n")[line].trim();
    if (!perItem.has(range[2])) perItem.set(range[2], []);
    perItem.get(range[2]).push(`${message}  [at: ${text.slice(0, 120)}]`);
  }
  return { perItem, noSchema, global, schemaNames };
}

async function main() {
  let input;
  try {
    input = JSON.parse(readFileSync(0, "utf8"));
    if (!Array.isArray(input.items)) throw new Error("items must be a list");
  } catch (e) {
    process.stderr.write(`validate.mjs: bad input: ${e.message}\n`);
    process.exit(2);
  }
  const items = input.items;
  const { perItem, noSchema, global, schemaNames } = typeCheck(items);
  const results = [];
  for (let i = 0; i < items.length; i++) {
    const errors = [];
    if (noSchema.has(i)) errors.push(noSchema.get(i));
    else {
      for (const e of await jsonSchemaErrors(items[i])) errors.push(`schema: ${e}`);
      for (const e of perItem.get(i) || []) errors.push(`type: ${e}`);
    }
    for (const e of global) errors.push(`type-check setup: ${e}`);
    results.push({ id: items[i].id, schema: schemaNames[i], errors });
  }
  const version = (name) => JSON.parse(readFileSync(path.join(here, "node_modules", name, "package.json"), "utf8")).version;
  const versions = {};
  for (const name of ["kubernetes-models", "@kubernetes-models/prometheus-operator", "typescript"]) {
    try {
      versions[name] = version(name);
    } catch {
      versions[name] = "?";
    }
  }
  process.stdout.write(JSON.stringify({ results, versions }) + "\n");
}

main().catch((e) => {
  process.stderr.write(`validate.mjs: ${e.stack || e}\n`);
  process.exit(2);
});
