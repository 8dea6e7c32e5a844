// The REST calls the viewer makes (docs/rest.md), with the bearer token the page keeps in
// sessionStorage when the server requires one. A refused call throws ApiError carrying the
// HTTP status and the server's message.

const TOKEN_KEY = "gatescope.token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function storeToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function call(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const token = storedToken();
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    value = null;
  }
  if (!response.ok) {
    const message =
      value && typeof value.error === "string" ? value.error : text || response.statusText;
    throw new ApiError(response.status, `${response.status}: ${message}`);
  }
  return value;
}

const modelPath = (name) => `/v2/models/${encodeURIComponent(name)}`;

// The ready models with their gatescope.v1 configuration (task, labels, maps, ...):
// [{name, version, config}] by name. A model whose metadata cannot be read is left out.
export async function readyModels() {
  const index = await call("POST", "/v2/repository/index", {ready: true});
  const names = [...new Set(index.filter((m) => m.state === "READY").map((m) => m.name))].sort();
  const answers = await Promise.allSettled(
    names.map((name) => call("GET", `${modelPath(name)}/gatescope`)),
  );
  const models = [];
  answers.forEach((a, i) => {
    if (a.status === "fulfilled" && a.value && a.value.config) {
      models.push({name: names[i], version: a.value.version, config: a.value.config});
    } else if (a.status === "rejected" && a.reason instanceof ApiError && a.reason.status === 401) {
      throw a.reason;
    }
  });
  return models;
}

// gatescope.v1 Predict and Explain as JSON (request fields as in inference.proto).
export function predict(name, request) {
  return call("POST", `${modelPath(name)}/predict`, request);
}

export function explain(name, request) {
  return call("POST", `${modelPath(name)}/explain`, request);
}
