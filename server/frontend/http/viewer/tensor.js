// Tensors and bytes in protobuf's JSON mapping (docs/rest.md): bytes are base64, a Tensor
// is {dtype: "FLOAT32" | "UINT8", shape: [...], data: base64 of little-endian values}.

export function base64FromBytes(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

export function bytesFromBase64(text) {
  const s = atob(text || "");
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

// A Tensor message as {shape: number[], data: Float32Array | Uint8Array}; null for an
// absent or empty one. Throws when the data does not match the shape.
export function decodeTensor(t) {
  if (!t || !t.shape || t.shape.length === 0) return null;
  const shape = t.shape.map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = bytesFromBase64(t.data);
  if (t.dtype === "UINT8") {
    if (bytes.length !== count)
      throw new Error(`UINT8 tensor [${shape}] has ${bytes.length} bytes`);
    return {shape, data: bytes};
  }
  if (t.dtype !== "FLOAT32") throw new Error(`unknown tensor dtype ${t.dtype}`);
  if (bytes.length !== count * 4)
    throw new Error(`FLOAT32 tensor [${shape}] has ${bytes.length} bytes`);
  const view = new DataView(bytes.buffer);
  const data = new Float32Array(count);
  for (let i = 0; i < count; i++) data[i] = view.getFloat32(i * 4, true);
  return {shape, data};
}

// The sub-tensor at leading indices `index` (fewer than the dimensions), e.g. at(t, [2])
// of a [H, h, w] tensor is head 2's [h, w] map. Shares t's data.
export function at(t, index) {
  const rest = t.shape.slice(index.length);
  const size = rest.reduce((a, b) => a * b, 1);
  let offset = 0;
  for (let d = 0; d < index.length; d++) {
    if (index[d] < 0 || index[d] >= t.shape[d])
      throw new Error(`index ${index} outside [${t.shape}]`);
    offset = offset * t.shape[d] + index[d];
  }
  return {shape: rest, data: t.data.subarray(offset * size, (offset + 1) * size)};
}

// The mean over the first dimension: [K, ...] -> [...].
export function meanOverFirst(t) {
  const rest = t.shape.slice(1);
  const size = rest.reduce((a, b) => a * b, 1);
  const out = new Float32Array(size);
  const k = t.shape[0];
  for (let j = 0; j < k; j++) {
    for (let i = 0; i < size; i++) out[i] += t.data[j * size + i];
  }
  for (let i = 0; i < size; i++) out[i] /= k;
  return {shape: rest, data: out};
}
