"""numpy <-> the wire: gatescope.v1 Tensor messages in protobuf's JSON mapping, and KServe
v2 datatypes."""
import base64

import numpy as np

# gatescope.v1 Tensor.DType names and their numpy types.
V1_DTYPES = {"UINT8": np.uint8, "FLOAT32": np.float32}
# KServe v2 datatype names and their little-endian numpy types (BYTES handled apart).
KSERVE_DTYPES = {
    "BOOL": np.dtype("?"), "UINT8": np.dtype("u1"), "INT8": np.dtype("i1"),
    "UINT16": np.dtype("<u2"), "INT16": np.dtype("<i2"), "UINT32": np.dtype("<u4"),
    "INT32": np.dtype("<i4"), "UINT64": np.dtype("<u8"), "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
}


def to_v1_tensor(array):
    """A numpy array (uint8 pixels or float32, already normalised) as a v1 Tensor."""
    array = np.asarray(array)
    if array.dtype == np.uint8:
        dtype = "UINT8"
    elif array.dtype in (np.float32, np.float64):
        dtype, array = "FLOAT32", array.astype("<f4")
    else:
        raise TypeError(f"tensor input must be uint8 or float32, not {array.dtype}")
    return {"dtype": dtype, "shape": [int(d) for d in array.shape],
            "data": base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")}


def is_v1_tensor(value):
    return isinstance(value, dict) and "dtype" in value and set(value) <= {"dtype", "shape", "data"}


def from_v1_tensor(value):
    """A v1 Tensor (JSON mapping) as a numpy array."""
    dtype = V1_DTYPES[value["dtype"]]
    shape = [int(d) for d in value.get("shape", [])]
    data = base64.b64decode(value.get("data", ""))
    return np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


def decode_v1(value, png_fields=()):
    """A v1 response (JSON mapping) with every Tensor turned into numpy and the bytes fields
    named in `png_fields` decoded from base64."""
    if is_v1_tensor(value):
        return from_v1_tensor(value)
    if isinstance(value, dict):
        return {k: (base64.b64decode(v) if k in png_fields and isinstance(v, str)
                    else decode_v1(v, png_fields)) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_v1(v, png_fields) for v in value]
    return value


def kserve_datatype(array):
    """The KServe datatype of a numpy array."""
    if array.dtype.kind in "OSU":
        return "BYTES"
    for name, dtype in KSERVE_DTYPES.items():
        if array.dtype.newbyteorder("<") == dtype or array.dtype == dtype:
            return name
    raise TypeError(f"no KServe datatype for {array.dtype}")


def kserve_bytes(array, datatype):
    """The raw little-endian contents of `array` as KServe sends them (BYTES: each element
    prefixed by its uint32 length)."""
    if datatype == "BYTES":
        out = bytearray()
        for item in np.asarray(array, dtype=object).ravel():
            b = item if isinstance(item, bytes) else str(item).encode()
            out += len(b).to_bytes(4, "little") + b
        return bytes(out)
    return np.ascontiguousarray(array, dtype=KSERVE_DTYPES[datatype]).tobytes()


def kserve_array(raw, datatype, shape):
    """numpy from raw KServe contents."""
    if datatype == "BYTES":
        items, pos = [], 0
        while pos < len(raw):
            n = int.from_bytes(raw[pos:pos + 4], "little")
            items.append(bytes(raw[pos + 4:pos + 4 + n]))
            pos += 4 + n
        return np.array(items, dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=KSERVE_DTYPES[datatype]).reshape(shape)
