"""Writes the seed corpora of the request and config fuzzers (tests/fuzz/corpus/) and the
generated PNG seeds of the image fuzzer; the other image seeds (*.jpg, colour*.png, rgba.png)
were written by OpenCV's encoders. Run with Debian's python3 from the repository root:
/usr/bin/python3 tests/fuzz/make_corpus.py"""
import importlib
import pathlib
import struct
import sys
import tempfile
import zlib

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from server_harness import generate_python_stubs  # noqa: E402
from gatescope.data.png import encode_gray_png  # noqa: E402

CORPUS = REPO / "tests" / "fuzz" / "corpus"

CLASSIFIER_JSON = """{"task":"image_classification","input":{"shape":[1,4,4]},
  "labels":["a","b","c"],"outputs":["logits"],"token_grid":[2,2],"cls_token":true,
  "maps":["attention"],"layers":1,"heads":1}"""
DETECTOR_JSON = """{"task":"object_detection","input":{"shape":[1,8,8],"any_size":true,
  "native_size":true},"labels":["a","b"],"outputs":["logits","boxes"],
  "maps":["sampling_points"],"layers":2,"heads":1,"detection":{"encoder_layers":1,
  "decoder_layers":1,"levels":1,"points":1,"queries":2,"score_threshold":0.5,
  "max_detections":4}}"""
SERVING = ['max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 500 '
           'preferred_batch_size: [4, 8] }',
           'instance_group [{ kind: KIND_CPU count: 2 }]',
           'dynamic_batching { priority_levels: 2 default_priority_level: 1 '
           'default_queue_policy { max_queue_size: 16 timeout_action: REJECT '
           'default_timeout_microseconds: 1000 allow_timeout_override: true } }']


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def gray_alpha_filters_png():
    """A 5 x 6 gray + alpha PNG whose rows use each of the five filter bytes (the data is
    whatever they give), its stream split over three IDATs, a tEXt before them: the
    direct reader's whole path (png_direct.h)."""
    rows = b"".join(bytes([r % 5]) + bytes((r * 37 + i * 11) % 256 for i in range(10))
                    for r in range(6))
    stream = zlib.compress(rows, 9)
    thirds = (0, len(stream) // 3, 2 * len(stream) // 3, len(stream))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 5, 6, 8, 4, 0, 0, 0))
            + _chunk(b"tEXt", b"Comment\0seed")
            + b"".join(_chunk(b"IDAT", stream[a:b]) for a, b in zip(thirds, thirds[1:]))
            + _chunk(b"IEND", b""))


def main():
    gray = encode_gray_png(np.arange(16, dtype=np.uint8).reshape(4, 4) * 16)
    (CORPUS / "image_decode" / "gray.png").write_bytes(gray)
    (CORPUS / "image_decode" / "gray_alpha_filters.png").write_bytes(gray_alpha_filters_png())
    with tempfile.TemporaryDirectory() as out:
        generate_python_stubs(out, "inference/grpc_service.proto", "inference/model_config.proto",
                              "gatescope/v1/inference.proto", "gatescope/v1/model_config.proto")
        sys.path.insert(0, out)
        kv = importlib.import_module("inference.grpc_service_pb2")
        import gatescope
        gatescope.__path__.append(str(pathlib.Path(out) / "gatescope"))
        v1 = importlib.import_module("gatescope.v1.inference_pb2")
        seeds = {}
        for dtype, raw in (("UINT8", bytes(range(16))),
                           ("FP32", np.linspace(0, 1, 16, dtype=np.float32).tobytes())):
            r = kv.ModelInferRequest(model_name="m")
            r.inputs.add(name="input", datatype=dtype, shape=[1, 1, 4, 4])
            r.raw_input_contents.append(raw)
            seeds[f"infer_{dtype.lower()}"] = r
        r = kv.ModelInferRequest(model_name="m")
        t = r.inputs.add(name="input", datatype="BYTES", shape=[2])
        t.contents.bytes_contents.extend([gray, gray])
        r.parameters["explain"].string_param = "rollout"
        r.parameters["max_detections"].int64_param = 2
        seeds["infer_bytes_explain"] = r
        p = v1.PredictRequest(model_name="m", image=gray, top_k=2)
        seeds["predict_image"] = p
        p = v1.PredictRequest(model_name="m", top_k=1)
        p.tensor.dtype = v1.Tensor.UINT8
        p.tensor.shape.extend([4, 4])
        p.tensor.data = bytes(16)
        seeds["predict_tensor"] = p
        for name, message in seeds.items():
            (CORPUS / "request" / name).write_bytes(message.SerializeToString())
    (CORPUS / "config" / "classifier.json").write_text(CLASSIFIER_JSON)
    (CORPUS / "config" / "detector.json").write_text(DETECTOR_JSON)
    for i, text in enumerate(SERVING):
        (CORPUS / "config" / f"config_{i}.pbtxt").write_text(text)


if __name__ == "__main__":
    main()
