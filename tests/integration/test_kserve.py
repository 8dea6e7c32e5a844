"""KServe v2 / Open Inference Protocol conformance, driven by a client generated from our
proto with Debian's protoc and grpc_python_plugin (python3-grpcio runtime)."""
import concurrent.futures
import importlib
import re
import struct
import sys

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, await_metric, generate_python_stubs, start_server, stop_server
from gatescope import ops
from gatescope.data import fashion_mnist
from gatescope.data.fashion_mnist import write_pngs

START, N = 9100, 6


@pytest.fixture(scope="module")
def kv(tmp_path_factory):
    out = tmp_path_factory.mktemp("kserve_stubs")
    generate_python_stubs(out, "inference/model_config.proto", "inference/grpc_service.proto")
    sys.path.insert(0, str(out))
    pb = importlib.import_module("inference.grpc_service_pb2")
    pb_grpc = importlib.import_module("inference.grpc_service_pb2_grpc")
    return pb, pb_grpc


@pytest.fixture(scope="module")
def stub(server, kv):
    channel = grpc.insecure_channel(server.address)
    yield kv[1].GRPCInferenceServiceStub(channel)
    channel.close()


@pytest.fixture(scope="module")
def images():
    imgs, _ = fashion_mnist.load_split("t10k")
    return imgs[START:START + N]


def reference_logits(model_name, images):
    ops.load()
    module = torch.jit.load(str(REPO / "model_repository" / model_name / "1" / "model.pt"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    with torch.no_grad():
        return module((x - fashion_mnist.MEAN) / fashion_mnist.STD)["logits"].numpy()


def normalised(images):
    return ((images.astype(np.float32) / 255.0 - fashion_mnist.MEAN) / fashion_mnist.STD)[:, None]


def infer(stub, pb, model, datatype, shape, raw, outputs=()):
    req = pb.ModelInferRequest(model_name=model, id="req-1")
    req.inputs.add(name="input", datatype=datatype, shape=shape)
    for o in outputs:
        req.outputs.add(name=o)
    req.raw_input_contents.append(raw)
    return stub.ModelInfer(req, timeout=60)


def logits_of(resp):
    i = [o.name for o in resp.outputs].index("logits")
    assert resp.outputs[i].datatype == "FP32"
    shape = tuple(resp.outputs[i].shape)
    return np.frombuffer(resp.raw_output_contents[i], dtype="<f4").reshape(shape)


def test_server_and_model_metadata(stub, kv):
    pb = kv[0]
    assert stub.ServerLive(pb.ServerLiveRequest()).live
    assert stub.ServerReady(pb.ServerReadyRequest()).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest())
    assert meta.name == "gatescope" and "model_repository" in meta.extensions
    assert stub.ModelReady(pb.ModelReadyRequest(name="dgvit_fmnist")).ready
    assert not stub.ModelReady(pb.ModelReadyRequest(name="nope")).ready
    m = stub.ModelMetadata(pb.ModelMetadataRequest(name="dgvit_fmnist"))
    assert list(m.versions) == ["1"] and m.platform == "pytorch_libtorch"
    assert (m.inputs[0].name, m.inputs[0].datatype, list(m.inputs[0].shape)) == \
        ("input", "FP32", [-1, 1, 28, 28])
    assert [(o.name, list(o.shape)) for o in m.outputs] == [("logits", [-1, 10]),
                                                            ("gate_mean", [-1, 4])]
    cfg = stub.ModelConfig(pb.ModelConfigRequest(name="dgvit_fmnist")).config
    # The shipped config.pbtxt's batching knobs (scripts/gatescope_tune.py) are in effect.
    shipped = (REPO / "model_repository" / "dgvit_fmnist" / "config.pbtxt").read_text()
    knob = lambda name: int(re.search(rf"^\s*{name}: (\d+)", shipped, re.M).group(1))
    assert cfg.name == "dgvit_fmnist" and cfg.max_batch_size == knob("max_batch_size")
    assert list(cfg.dynamic_batching.preferred_batch_size) == [knob("preferred_batch_size")]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == \
        knob("max_queue_delay_microseconds")
    assert list(cfg.input[0].dims) == [1, 28, 28] and cfg.instance_group[0].count == 1
    assert cfg.HasField("dynamic_batching")
    index = {(m.name, m.version): m.state
             for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
    assert index[("dgvit_fmnist", "1")] == "READY" and index[("vit_fmnist", "1")] == "READY"


@pytest.mark.parametrize("model", ["dgvit_fmnist", "vit_fmnist"])
def test_infer_fp32_uint8_and_bytes_agree_with_python(stub, kv, images, model, tmp_path):
    pb = kv[0]
    want = reference_logits(model, images)
    fp32 = infer(stub, pb, model, "FP32", [N, 1, 28, 28], normalised(images).tobytes())
    assert fp32.model_name == model and fp32.id == "req-1"
    np.testing.assert_allclose(logits_of(fp32), want, atol=1e-4)
    u8 = infer(stub, pb, model, "UINT8", [N, 28, 28], images.tobytes())
    np.testing.assert_allclose(logits_of(u8), want, atol=1e-4)
    pngs = [p.read_bytes() for p, _ in write_pngs(tmp_path, start=START, count=N)]
    raw = b"".join(struct.pack("<I", len(b)) + b for b in pngs)
    encoded = infer(stub, pb, model, "BYTES", [N], raw, outputs=["logits"])
    np.testing.assert_allclose(logits_of(encoded), want, atol=1e-4)
    # typed contents instead of raw
    req = pb.ModelInferRequest(model_name=model)
    t = req.inputs.add(name="input", datatype="FP32", shape=[N, 1, 28, 28])
    t.contents.fp32_contents.extend(normalised(images).ravel().tolist())
    np.testing.assert_allclose(logits_of(stub.ModelInfer(req)), want, atol=1e-4)


def test_bad_requests_get_clear_codes(stub, kv, images):
    pb = kv[0]
    cases = [
        (dict(model="dgvit_fmnist", datatype="FP32", shape=[1, 1, 28, 30],
              raw=b"\0" * 4 * 28 * 30), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(model="dgvit_fmnist", datatype="FP32", shape=[2, 1, 28, 28],
              raw=b"\0" * 4 * 28 * 28), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(model="dgvit_fmnist", datatype="INT64", shape=[1, 1, 28, 28],
              raw=b"\0" * 8 * 28 * 28), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(model="dgvit_fmnist", datatype="BYTES", shape=[1],
              raw=struct.pack("<I", 5) + b"hello"), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(model="dgvit_fmnist", datatype="UINT8", shape=[1, 28, 28],
              raw=images[0].tobytes(), outputs=["gate_maps"]), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(model="nope", datatype="UINT8", shape=[1, 28, 28], raw=images[0].tobytes()),
         grpc.StatusCode.NOT_FOUND),
        (dict(model="dgvit_fmnist", datatype="FP32", shape=[2**62, 1, 28, 28], raw=b""),
         grpc.StatusCode.INVALID_ARGUMENT),
    ]
    for kwargs, code in cases:
        with pytest.raises(grpc.RpcError) as err:
            infer(stub, pb, **kwargs)
        assert err.value.code() == code, kwargs
    with pytest.raises(grpc.RpcError) as err:
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="vit_fmnist"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # still serving
    assert logits_of(infer(stub, pb, "dgvit_fmnist", "UINT8", [1, 28, 28],
                           images[0].tobytes())).shape == (1, 10)


def test_statistics_count_inferences(stub, kv, images):
    pb = kv[0]
    before = stub.ModelStatistics(pb.ModelStatisticsRequest(name="vit_fmnist")).model_stats[0]
    infer(stub, pb, "vit_fmnist", "UINT8", [N, 28, 28], images.tobytes())
    s = stub.ModelStatistics(pb.ModelStatisticsRequest(name="vit_fmnist")).model_stats[0]
    assert s.inference_count == before.inference_count + N
    assert s.execution_count > before.execution_count
    # Every inference statistic counts examples, so all of them moved by the N examples of
    # the one call; the batch statistics count executions, which add up to the examples.
    for stage in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        assert getattr(s.inference_stats, stage).count == \
            getattr(before.inference_stats, stage).count + N, stage
        assert getattr(s.inference_stats, stage).ns > getattr(before.inference_stats, stage).ns
    def executions(stats):
        return {b.batch_size: b.compute_infer.count for b in stats.batch_stats}
    after_b, before_b = executions(s), executions(before)
    assert sum(size * (n - before_b.get(size, 0)) for size, n in after_b.items()) == N
    assert sum(after_b.values()) - sum(before_b.values()) == \
        s.execution_count - before.execution_count
    assert s.last_inference > 0
    with pytest.raises(grpc.RpcError) as err:
        stub.ModelStatistics(pb.ModelStatisticsRequest(name="nope"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_load_and_unload_under_load(kv, images, tmp_path):
    """With --model_control=explicit: unloading and reloading one model while another
    serves a steady stream loses none of the other model's requests."""
    pb, pb_grpc = kv
    repo = tmp_path / "repo"
    for name in ("dgvit_fmnist", "vit_fmnist"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.pt").write_bytes(
            (REPO / "model_repository" / name / "1" / "model.pt").read_bytes())
    srv = start_server(tmp_path, repo, extra=["--model_control=explicit"])
    channel = grpc.insecure_channel(srv.address)
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    want = reference_logits("dgvit_fmnist", images)
    try:
        def hammer(_):
            got = logits_of(infer(stub, pb, "dgvit_fmnist", "UINT8", [N, 28, 28],
                                  images.tobytes()))
            np.testing.assert_allclose(got, want, atol=1e-4)
            return True

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(hammer, i) for i in range(80)]
            stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="vit_fmnist"))
            assert not stub.ModelReady(pb.ModelReadyRequest(name="vit_fmnist")).ready
            index = {m.name: (m.state, m.reason)
                     for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
            assert index["vit_fmnist"] == ("UNAVAILABLE", "not loaded")
            assert index["dgvit_fmnist"][0] == "READY"
            with pytest.raises(grpc.RpcError) as err:
                infer(stub, pb, "vit_fmnist", "UINT8", [1, 28, 28], images[0].tobytes())
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="vit_fmnist"))
            assert stub.ModelReady(pb.ModelReadyRequest(name="vit_fmnist")).ready
            assert all(f.result(timeout=120) for f in futures)
        np.testing.assert_allclose(
            logits_of(infer(stub, pb, "vit_fmnist", "UINT8", [N, 28, 28], images.tobytes())),
            reference_logits("vit_fmnist", images), atol=1e-4)
        with pytest.raises(grpc.RpcError) as err:
            stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="missing"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert "vit_fmnist" in srv.client("health", "--service", "vit_fmnist").stdout
    finally:
        channel.close()
        assert stop_server(srv) == 0


def test_sigterm_drains_queued_requests_then_exits(kv, images, tmp_path):
    """Requests waiting in a batching queue when SIGTERM arrives still get their answers;
    new ones are refused with UNAVAILABLE; the process exits 0 within the drain limit."""
    import signal
    pb, pb_grpc = kv
    repo = tmp_path / "repo"
    (repo / "dgvit_fmnist" / "1").mkdir(parents=True)
    (repo / "dgvit_fmnist" / "1" / "model.pt").write_bytes(
        (REPO / "model_repository" / "dgvit_fmnist" / "1" / "model.pt").read_bytes())
    # Batches would wait 10 minutes for company: only the drain's flush can answer them.
    (repo / "dgvit_fmnist" / "config.pbtxt").write_text(
        "max_batch_size: 64 dynamic_batching { max_queue_delay_microseconds: 600000000 }")
    srv = start_server(tmp_path, repo, extra=["--drain_seconds=5"])
    channel = grpc.insecure_channel(srv.address)
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    want = reference_logits("dgvit_fmnist", images)
    try:
        stub.ServerReady(pb.ServerReadyRequest(), timeout=10)  # connection is up
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(infer, stub, pb, "dgvit_fmnist", "UINT8", [N, 28, 28],
                                   images.tobytes()) for _ in range(8)]
            # All eight requests (N examples each) wait in the queue, as the pending gauge says.
            await_metric(srv, "gatescope_pending_requests", 8 * N, model="dgvit_fmnist")
            assert not any(f.done() for f in futures)
            srv.proc.send_signal(signal.SIGTERM)
            for f in futures:  # answered by the flush, long before the batching delay
                np.testing.assert_allclose(logits_of(f.result(timeout=30)), want, atol=1e-4)
        assert srv.proc.wait(timeout=15) == 0
        assert "draining" in srv.log()
    finally:
        channel.close()
        if srv.proc.poll() is None:
            stop_server(srv)
