"""Attacks on the real server that must be refused cheaply, each with the bound it must hold:
decode bombs (formats other than PNG/JPEG, headers declaring gigapixels, a stray byte hiding a
JPEG's frame), a slow image call that must not hold up other requests of its model, and
non-finite inputs. Memory is read from /proc (VmHWM: the server's peak resident set)."""
import concurrent.futures
import struct
import time
import zlib

import grpc
import numpy as np
import pytest

from gatescope.data.png import encode_gray_png
from server_harness import api_stubs, serve_shipped

MODEL = "dgvit_fmnist"
MIB = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, [MODEL])


@pytest.fixture(scope="module")
def apis(server, tmp_path_factory):
    yield from api_stubs(server, tmp_path_factory)


def peak_rss(server):
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def bmp_rle_bomb(side=16384):
    """An 8-bit RLE BMP declaring side x side pixels in about 1 KB (what cv::imdecode would
    have allocated in full)."""
    palette = bytes(256 * 4)
    data = b"\x00\x01"  # end of bitmap at once
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, side, side, 1, 8, 1, len(data), 2835, 2835, 256, 0)
    header = b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset)
    return header + info + palette + data


def jpeg_bomb(height=30000, width=30000):
    """A baseline gray JPEG whose frame declares height x width, with a stray byte before
    the frame marker (which libjpeg skips): the case a hand-written header reader missed."""
    def segment(marker, body):
        return b"\xff" + bytes([marker]) + struct.pack(">H", len(body) + 2) + body
    dqt = segment(0xDB, b"\x00" + bytes([1] * 64))
    sof = segment(0xC0, b"\x08" + struct.pack(">HH", height, width) + b"\x01\x01\x11\x00")
    one_code = b"\x01" + bytes(15)  # one code of length 1
    dht = segment(0xC4, b"\x00" + one_code + b"\x00") + segment(0xC4, b"\x10" + one_code + b"\x00")
    sos = segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
    return b"\xff\xd8" + dqt + b"\x00" + sof + dht + sos + b"\x3f" * 64 + b"\xff\xd9"


def png_chunk(kind, body):
    return (struct.pack(">I", len(body)) + kind + body +
            struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))


def png_bomb(side=8192):
    """A valid PNG header (correct CRCs) declaring side x side gray pixels, with one row."""
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
    idat = png_chunk(b"IDAT", zlib.compress(bytes(side + 1)))
    return b"\x89PNG\r\n\x1a\n" + ihdr + idat + png_chunk(b"IEND", b"")


def predict(v1, stub, image, timeout=30):
    return stub.Predict(v1.PredictRequest(model_name=MODEL, image=image, top_k=1),
                        timeout=timeout)


def infer_bytes(kv, stub, images, timeout=60):
    req = kv.ModelInferRequest(model_name=MODEL)
    tensor = req.inputs.add(name="input", datatype="BYTES", shape=[len(images)])
    tensor.contents.bytes_contents.extend(images)
    return stub.ModelInfer(req, timeout=timeout)


@pytest.mark.parametrize("name,bomb,message", [
    ("bmp", bmp_rle_bomb(), "neither PNG nor JPEG"),
    ("jpeg-stray-byte", jpeg_bomb(), "30000x30000"),
    ("png", png_bomb(), "8192x8192"),
])
def test_decode_bombs_are_refused_before_allocating(server, apis, name, bomb, message):
    kv, kv_stub, v1, v1_stub = apis
    before = peak_rss(server)
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        predict(v1, v1_stub, bomb)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
    assert message in err.value.details(), err.value.details()
    # Sixteen bombs (the model's max batch) in one KServe call: refused as a whole, quickly.
    with pytest.raises(grpc.RpcError) as err:
        infer_bytes(kv, kv_stub, [bomb] * 16)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
    assert message in err.value.details(), err.value.details()
    took = time.monotonic() - start
    grew = peak_rss(server) - before
    print(f"{name}: {len(bomb)} bytes, 17 refused in {took * 1000:.0f} ms, peak RSS +{grew / MIB:.1f} MiB")
    assert took < 5.0, f"{name} took {took:.1f} s"  # bound: no decode happened (was 6-36 s)
    assert grew < 64 * MIB, f"{name} raised the peak RSS by {grew / MIB:.0f} MiB"  # was +256..860


def test_largest_accepted_images_do_not_hold_up_the_model(server, apis):
    """A call of sixteen 16-megapixel PNGs (the most a fixed-size model accepts, each decoded
    in full) is decoded before queuing, on the preparation threads: a pixel-tensor request to
    the same model sent after it is answered before it."""
    kv, kv_stub, v1, v1_stub = apis
    big = encode_gray_png(np.full((4096, 4096), 128, dtype=np.uint8))
    small = v1.PredictRequest(model_name=MODEL, top_k=1)
    small.tensor.dtype = v1.Tensor.UINT8
    small.tensor.shape.extend([28, 28])
    small.tensor.data = bytes(28 * 28)
    finished = []
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(lambda: (infer_bytes(kv, kv_stub, [big] * 16, timeout=120),
                                    finished.append("big")))
        time.sleep(0.1)  # let the big call reach the server first
        fast = pool.submit(lambda: (v1_stub.Predict(small, timeout=60), finished.append("small")))
        response, _ = slow.result()
        fast.result()
    assert len(response.outputs[0].shape) == 2 and response.outputs[0].shape[0] == 16
    assert finished == ["small", "big"], finished


def test_non_finite_inputs_are_refused(server, apis):
    kv, kv_stub, v1, v1_stub = apis
    pixels = np.full((1, 1, 28, 28), 0.5, dtype=np.float32)
    pixels[0, 0, 3, 4] = np.nan
    req = kv.ModelInferRequest(model_name=MODEL)
    req.inputs.add(name="input", datatype="FP32", shape=[1, 1, 28, 28])
    req.raw_input_contents.append(pixels.tobytes())
    with pytest.raises(grpc.RpcError) as err:
        kv_stub.ModelInfer(req, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "non-finite" in err.value.details()
    tensor = v1.PredictRequest(model_name=MODEL, top_k=1)
    tensor.tensor.dtype = v1.Tensor.FLOAT32
    tensor.tensor.shape.extend([28, 28])
    tensor.tensor.data = pixels[0, 0].tobytes()
    with pytest.raises(grpc.RpcError) as err:
        v1_stub.Predict(tensor, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The server still answers, and its gate statistics stayed finite.
    assert predict(v1, v1_stub, encode_gray_png(np.zeros((28, 28), np.uint8))).classes


@pytest.mark.parametrize("method", [
    "/gatescope.v1.Inference/Predict", "/gatescope.v1.Inference/Explain",
    "/gatescope.v1.Inference/ListModels", "/gatescope.v1.Inference/GetModelMetadata",
    "/inference.GRPCInferenceService/ModelInfer", "/inference.GRPCInferenceService/ServerLive",
    "/inference.GRPCInferenceService/ModelStatistics",
    "/inference.GRPCInferenceService/RepositoryModelLoad", "/grpc.health.v1.Health/Check"])
def test_unparseable_messages_get_invalid_argument_with_a_reason(server, apis, method):
    """Bytes that are not the method's message (a truncated varint, a field with wire type 7)
    are refused INVALID_ARGUMENT naming the expected message; the server answers on."""
    _, _, v1, v1_stub = apis
    channel = grpc.insecure_channel(server.address)
    raw = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    expected = method.rsplit("/", 1)[1]
    for garbage in (b"\x08\xff\xff", b"\x0f", b"\x0a\x10abc"):
        with pytest.raises(grpc.RpcError) as err:
            raw(garbage, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (garbage, err.value)
        assert "is not a valid" in err.value.details() and "Request message" in err.value.details()
        assert expected.replace("GetModelMetadata", "ModelMetadata").replace(
            "Check", "HealthCheck") in err.value.details()
    channel.close()
    assert predict(v1, v1_stub, encode_gray_png(np.zeros((28, 28), np.uint8))).classes


def test_an_unparseable_health_watch_gets_invalid_argument(server):
    channel = grpc.insecure_channel(server.address)
    watch = channel.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=None,
                                 response_deserializer=None)
    with pytest.raises(grpc.RpcError) as err:
        list(watch(b"\x0a\x10abc", timeout=10))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "grpc.health.v1.HealthCheckRequest" in err.value.details()
    channel.close()


def test_malformed_messages_do_not_flood_the_log(server, apis):
    """Invalid UTF-8 in a string field makes protobuf log one line per message; the server
    lets one such line through per 10 s. Each such call is answered INVALID_ARGUMENT by the
    server's own parse (wire_message.h), not gRPC's bare UNIMPLEMENTED."""
    _, _, v1, v1_stub = apis
    channel = grpc.insecure_channel(server.address)
    raw = channel.unary_unary("/gatescope.v1.Inference/Predict", request_serializer=None,
                              response_deserializer=None)
    before = server.log().count("protobuf")
    answers = set()
    for _ in range(200):
        try:
            raw(b"\x0a\x02\xff\xfe", timeout=10)  # model_name: 2 bytes of invalid UTF-8
        except grpc.RpcError as err:
            answers.add((err.code(), err.details()))
    channel.close()
    assert answers == {(grpc.StatusCode.INVALID_ARGUMENT, "the request is not a valid "
                        "gatescope.v1.PredictRequest message (protobuf could not parse it)")}
    assert server.log().count("protobuf") - before <= 2, server.log()[-2000:]
    assert predict(v1, v1_stub, encode_gray_png(np.zeros((28, 28), np.uint8))).classes
