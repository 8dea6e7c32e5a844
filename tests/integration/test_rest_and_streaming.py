"""Triton/KServe client fidelity: the KServe v2 REST API driven by a plain HTTP client
(urllib, following the protocol's documented JSON and Triton's binary tensor extension),
ModelStreamInfer driven by generated gRPC stubs, and the semantics Triton clients rely on
(classification extension, uint64 priority, refused load overrides, output order, input
name, statistics of a missing version)."""
import json
import struct
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest

from server_harness import api_stubs, serve_shipped
from test_kserve import images as kserve_images  # noqa: F401  (fixture)
from test_kserve import normalised, reference_logits

MODEL = "dgvit_fmnist"
images = kserve_images


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory, [MODEL, "vit_fmnist"],
                             extra=["--model_control=explicit"])


@pytest.fixture(scope="module")
def apis(server, tmp_path_factory):
    yield from api_stubs(server, tmp_path_factory)


def rest(server, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one REST call."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=data,
                                 method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def rest_json(server, method, path, body=None):
    status, _, raw = rest(server, method, path, body)
    return status, json.loads(raw) if raw else None


# --- REST: health, metadata, configuration, statistics, repository ----------------------

def test_rest_health_and_metadata(server):
    assert rest(server, "GET", "/v2/health/live")[0] == 200
    assert rest(server, "GET", "/v2/health/ready")[0] == 200
    assert rest(server, "GET", f"/v2/models/{MODEL}/ready")[0] == 200
    assert rest(server, "GET", f"/v2/models/{MODEL}/versions/1/ready")[0] == 200
    assert rest(server, "GET", "/v2/models/nope/ready")[0] == 400
    status, meta = rest_json(server, "GET", "/v2")
    assert status == 200 and meta["name"] == "gatescope"
    assert {"binary_tensor_data", "classification"} <= set(meta["extensions"])
    status, m = rest_json(server, "GET", f"/v2/models/{MODEL}")
    assert status == 200
    assert m["name"] == MODEL and m["versions"] == ["1"] and m["platform"] == "pytorch_libtorch"
    assert m["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 28, 28]}]
    assert [o["name"] for o in m["outputs"]] == ["logits", "gate_mean"]
    assert m["outputs"][0]["shape"] == [-1, 10]


def test_rest_config_and_statistics_use_numbers(server):
    status, cfg = rest_json(server, "GET", f"/v2/models/{MODEL}/config")
    assert status == 200
    assert cfg["name"] == MODEL and cfg["max_batch_size"] == 16
    assert cfg["input"][0]["dims"] == [1, 28, 28]           # int64 as JSON numbers
    assert isinstance(cfg["dynamic_batching"]["max_queue_delay_microseconds"], int)
    status, stats = rest_json(server, "GET", f"/v2/models/{MODEL}/stats")
    assert status == 200 and stats["model_stats"][0]["name"] == MODEL
    s = stats["model_stats"][0]
    assert isinstance(s["inference_count"], int) and isinstance(s["execution_count"], int)
    assert isinstance(s["inference_stats"]["success"]["ns"], int)
    status, every = rest_json(server, "GET", "/v2/models/stats")
    assert status == 200 and {s["name"] for s in every["model_stats"]} == {MODEL, "vit_fmnist"}
    status, err = rest_json(server, "GET", f"/v2/models/{MODEL}/versions/7/stats")
    assert status == 404 and "no version '7'" in err["error"]
    status, err = rest_json(server, "GET", "/v2/models/nope")
    assert status == 404 and "error" in err


def test_rest_repository_index_load_unload(server):
    status, index = rest_json(server, "POST", "/v2/repository/index", {})
    assert status == 200
    assert {(m["name"], m["state"]) for m in index} == {(MODEL, "READY"), ("vit_fmnist", "READY")}
    status, err = rest_json(server, "POST", "/v2/repository/models/vit_fmnist/load",
                            {"parameters": {"config": "{\"max_batch_size\": 4}"}})
    assert status == 400 and "not supported" in err["error"]
    assert rest(server, "POST", "/v2/repository/models/vit_fmnist/unload", {})[0] == 200
    assert rest(server, "GET", "/v2/models/vit_fmnist/ready")[0] == 400
    assert rest(server, "POST", "/v2/repository/models/vit_fmnist/load", {})[0] == 200
    assert rest(server, "GET", "/v2/models/vit_fmnist/ready")[0] == 200


def test_rest_errors_are_json_with_http_statuses(server):
    status, err = rest_json(server, "GET", "/v2/nothing/here")
    assert status == 404 and "no route" in err["error"]
    status, _, _ = rest(server, "GET", f"/v2/models/{MODEL}/infer")
    assert status == 405
    status, err = rest_json(server, "POST", f"/v2/models/{MODEL}/infer", b"{not json")
    assert status == 400 and "not valid JSON" in err["error"]
    status, err = rest_json(server, "POST", "/v2/models/nope/infer",
                            {"inputs": [{"name": "input", "shape": [1], "datatype": "FP32",
                                         "data": [0]}]})
    assert status == 404
    status, err = rest_json(server, "POST", f"/v2/models/{MODEL}/infer",
                            {"inputs": [{"name": "input", "shape": [1, 1, 28, 28],
                                         "datatype": "FP32", "data": [0.0] * 5}]})
    assert status == 400 and "elements" in err["error"]


# --- REST inference ---------------------------------------------------------------------

def test_rest_json_infer_equals_the_model(server, images):
    x = normalised(images)
    body = {"id": "r1", "inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                                    "data": x.tolist()}]}               # nested row-major
    status, out = rest_json(server, "POST", f"/v2/models/{MODEL}/infer", body)
    assert status == 200, out
    assert out["id"] == "r1" and out["model_name"] == MODEL
    # No outputs asked for: every output in metadata order (not alphabetical).
    assert [o["name"] for o in out["outputs"]] == ["logits", "gate_mean"]
    logits = np.array(out["outputs"][0]["data"], dtype=np.float32).reshape(out["outputs"][0]["shape"])
    np.testing.assert_allclose(logits, reference_logits(MODEL, images), atol=1e-4)


def test_rest_binary_tensors_in_and_out(server, images):
    x = normalised(images)
    header = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "logits", "parameters": {"binary_data": True}},
                                     {"name": "gate_mean"}]}).encode()
    status, headers, raw = rest(server, "POST", f"/v2/models/{MODEL}/infer",
                                header + x.astype("<f4").tobytes(),
                                {"Inference-Header-Content-Length": str(len(header)),
                                 "Content-Type": "application/octet-stream"})
    assert status == 200, raw
    n = int(headers["Inference-Header-Content-Length"])
    meta = json.loads(raw[:n])
    logits_meta, gates_meta = meta["outputs"]
    size = logits_meta["parameters"]["binary_data_size"]
    assert size == len(images) * 10 * 4 and len(raw) == n + size
    logits = np.frombuffer(raw[n:], dtype="<f4").reshape(logits_meta["shape"])
    np.testing.assert_allclose(logits, reference_logits(MODEL, images), atol=1e-4)
    assert "data" in gates_meta and gates_meta["shape"] == [len(images), 4]  # JSON, as asked


def test_rest_uint8_and_classification_extension(server, images):
    body = {"inputs": [{"name": "input", "shape": [len(images), 1, 28, 28], "datatype": "UINT8",
                        "data": images[:, None].astype(int).ravel().tolist()}],
            "outputs": [{"name": "logits", "parameters": {"classification": 3}}]}
    status, out = rest_json(server, "POST", f"/v2/models/{MODEL}/infer", body)
    assert status == 200, out
    (cls,) = out["outputs"]
    assert cls["datatype"] == "BYTES" and cls["shape"] == [len(images), 3]
    ref = reference_logits(MODEL, images)
    for row, got in zip(ref, np.array(cls["data"]).reshape(len(images), 3)):
        top = np.argsort(-row)[:3]
        fields = [g.split(":") for g in got]
        assert [int(f[1]) for f in fields] == list(top)
        np.testing.assert_allclose([float(f[0]) for f in fields], row[top], atol=1e-4)
        assert all(len(f) == 3 and f[2] for f in fields)  # a label for every class


def test_rest_explain_route_matches_grpc(server, apis, images):
    _, _, v1, v1_stub = apis
    tensor = {"dtype": "UINT8", "shape": ["1", "28", "28"],
              "data": __import__("base64").b64encode(images[0].tobytes()).decode()}
    status, out = rest_json(server, "POST", f"/v2/models/{MODEL}/explain",
                            {"tensor": tensor, "rollout": True, "gates": True})
    assert status == 200, out
    grpc_out = v1_stub.Explain(v1.ExplainRequest(
        model_name=MODEL, tensor=v1.Tensor(dtype=v1.Tensor.UINT8, shape=[1, 28, 28],
                                           data=images[0].tobytes()),
        rollout=True, gates=True), timeout=60)
    rollout = np.frombuffer(__import__("base64").b64decode(out["rollout"]["data"]), "<f4")
    np.testing.assert_allclose(rollout, np.frombuffer(grpc_out.rollout.data, "<f4"), atol=1e-6)
    assert len(out["gates"]) == len(grpc_out.gates) > 0
    status, err = rest_json(server, "POST", f"/v2/models/{MODEL}/explain", {"rollout": "x"})
    assert status == 400


# --- gRPC semantics Triton's client relies on -------------------------------------------

def grpc_infer(kv, model, x, **params):
    req = kv.ModelInferRequest(model_name=model, id="g1")
    req.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
    req.raw_input_contents.append(x.astype("<f4").tobytes())
    for k, v in params.items():
        req.parameters[k].CopyFrom(v)
    return req


def test_priority_as_uint64_is_read_and_checked(apis, images):
    kv, stub, _, _ = apis
    x = normalised(images[:1])
    ok = grpc_infer(kv, MODEL, x, priority=kv.InferParameter(uint64_param=1))
    assert stub.ModelInfer(ok, timeout=60).outputs
    bad = grpc_infer(kv, MODEL, x, priority=kv.InferParameter(uint64_param=99))
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(bad, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "priority" in e.value.details()


def test_grpc_classification_and_input_name(apis, images):
    kv, stub, _, _ = apis
    x = normalised(images[:2])
    req = grpc_infer(kv, MODEL, x)
    req.outputs.add(name="logits").parameters["classification"].CopyFrom(
        kv.InferParameter(int64_param=2))
    resp = stub.ModelInfer(req, timeout=60)
    assert resp.outputs[0].datatype == "BYTES" and list(resp.outputs[0].shape) == [2, 2]
    raw, strings = resp.raw_output_contents[0], []
    while raw:
        (n,) = struct.unpack("<I", raw[:4])
        strings.append(raw[4:4 + n].decode())
        raw = raw[4 + n:]
    ref = reference_logits(MODEL, images[:2])
    assert [int(s.split(":")[1]) for s in strings] == \
        [int(i) for row in ref for i in np.argsort(-row)[:2]]
    wrong = grpc_infer(kv, MODEL, x)
    wrong.inputs[0].name = "pixels"
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(wrong, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'pixels'" in e.value.details()


def test_grpc_load_overrides_refused_and_missing_version_not_found(apis):
    kv, stub, _, _ = apis
    req = kv.RepositoryModelLoadRequest(model_name="vit_fmnist")
    req.parameters["config"].CopyFrom(kv.ModelRepositoryParameter(string_param="{}"))
    with pytest.raises(grpc.RpcError) as e:
        stub.RepositoryModelLoad(req, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    req = kv.RepositoryModelLoadRequest(model_name="vit_fmnist")
    req.parameters["file:1/model.pt"].CopyFrom(kv.ModelRepositoryParameter(bytes_param=b"x"))
    with pytest.raises(grpc.RpcError) as e:
        stub.RepositoryModelLoad(req, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelStatistics(kv.ModelStatisticsRequest(name=MODEL, version="9"), timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "no version" in e.value.details()


# --- ModelStreamInfer -------------------------------------------------------------------

def test_stream_answers_every_request_and_errors_per_request(apis, images):
    kv, stub, _, _ = apis
    x = normalised(images)
    requests = []
    for i in range(len(images)):
        req = grpc_infer(kv, MODEL, x[i:i + 1])
        req.id = f"s{i}"
        requests.append(req)
    bad = kv.ModelInferRequest(model_name="nope", id="bad")
    bad.inputs.add(name="input", datatype="FP32", shape=[1, 1, 28, 28])
    bad.raw_input_contents.append(x[:1].astype("<f4").tobytes())
    requests.insert(2, bad)
    replies = list(stub.ModelStreamInfer(iter(requests), timeout=120))
    assert len(replies) == len(requests)
    by_id = {r.infer_response.id: r for r in replies}
    assert set(by_id) == {r.id for r in requests}
    assert "unknown model" in by_id["bad"].error_message or "nope" in by_id["bad"].error_message
    ref = reference_logits(MODEL, images)
    for i in range(len(images)):
        reply = by_id[f"s{i}"]
        assert reply.error_message == ""
        out = reply.infer_response
        assert out.outputs[0].name == "logits"
        got = np.frombuffer(out.raw_output_contents[0], "<f4")
        np.testing.assert_allclose(got, ref[i], atol=1e-4)


def test_stream_of_many_requests_is_flow_controlled(apis, images):
    """More requests than a stream keeps in flight (64): all answered, none lost."""
    kv, stub, _, _ = apis
    x = normalised(images[:1])
    requests = []
    for i in range(150):
        req = grpc_infer(kv, MODEL, x)
        req.id = str(i)
        requests.append(req)
    replies = list(stub.ModelStreamInfer(iter(requests), timeout=300))
    assert sorted(int(r.infer_response.id) for r in replies) == list(range(150))
    assert all(r.error_message == "" for r in replies)


# --- declared limits and what metadata cannot say ---------------------------------------

def test_batch_limit_is_declared_and_enforced(server, apis, images):
    kv, stub, _, _ = apis
    cfg = stub.ModelConfig(kv.ModelConfigRequest(name=MODEL), timeout=10).config
    limit = cfg.max_batch_size
    x = np.repeat(normalised(images[:1]), limit + 1, axis=0)
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(grpc_infer(kv, MODEL, x), timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"max_batch_size {limit}" in e.value.details()
    assert len(stub.ModelInfer(grpc_infer(kv, MODEL, x[:limit]), timeout=60).outputs) == 2
    status, err = rest_json(server, "POST", f"/v2/models/{MODEL}/infer",
                            {"inputs": [{"name": "input", "shape": list(x.shape),
                                         "datatype": "FP32", "data": x.ravel().tolist()}]})
    assert status == 400 and f"max_batch_size {limit}" in err["error"]


def test_config_parameters_tell_datatypes_preprocessing_and_labels(apis):
    kv, stub, v1, v1_stub = apis
    params = {k: v.string_value for k, v in
              stub.ModelConfig(kv.ModelConfigRequest(name=MODEL), timeout=10).config
              .parameters.items()}
    meta = v1_stub.GetModelMetadata(v1.ModelMetadataRequest(model_name=MODEL), timeout=10).config
    assert params["task"] == "image_classification"
    assert params["input_datatypes"].split(",") == ["FP32", "UINT8", "BYTES"]
    assert json.loads(params["labels"]) == list(meta.labels)
    np.testing.assert_allclose([float(v) for v in params["input_mean"].split(",")], meta.input.mean)
    np.testing.assert_allclose([float(v) for v in params["input_std"].split(",")], meta.input.std)
    assert params["input_color"] == meta.input.color


def test_message_size_limit_is_a_flag(tmp_path_factory, images):
    """A request over --max_message_bytes is refused (gRPC: RESOURCE_EXHAUSTED from gRPC
    itself; REST: 413); the same request passes once the flag is raised."""
    from server_harness import import_api_modules, start_server, stop_server
    import shutil
    from server_harness import REPO
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(REPO / "model_repository" / MODEL, repo / MODEL)
    kv, kv_grpc, _, _ = import_api_modules(tmp_path_factory.mktemp("stubs"))
    x = np.repeat(normalised(images[:1]), 16, axis=0)  # 50 KiB of FP32
    for limit, passes in ((16 << 10, False), (1 << 20, True)):
        srv = start_server(tmp_path_factory.mktemp("server"), repo,
                           [f"--max_message_bytes={limit}", "--grpc_memory_bytes=4194304"])
        try:
            with grpc.insecure_channel(srv.address) as channel:
                stub = kv_grpc.GRPCInferenceServiceStub(channel)
                if passes:
                    assert stub.ModelInfer(grpc_infer(kv, MODEL, x), timeout=60).outputs
                else:
                    with pytest.raises(grpc.RpcError) as e:
                        stub.ModelInfer(grpc_infer(kv, MODEL, x), timeout=60)
                    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            header = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape),
                                             "datatype": "FP32",
                                             "parameters": {"binary_data_size": x.nbytes}}]})
            status, _, _ = rest(srv, "POST", f"/v2/models/{MODEL}/infer",
                                header.encode() + x.astype("<f4").tobytes(),
                                {"Inference-Header-Content-Length": str(len(header))})
            assert status == (200 if passes else 413)
        finally:
            assert stop_server(srv) == 0, srv.log()


def test_statistics_are_per_version(tmp_path_factory, images):
    """Two versions of one model: each reports only the calls it answered."""
    import shutil
    from server_harness import REPO, import_api_modules, start_server, stop_server
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(REPO / "model_repository" / MODEL, repo / MODEL)
    shutil.copytree(repo / MODEL / "1", repo / MODEL / "2")
    kv, kv_grpc, _, _ = import_api_modules(tmp_path_factory.mktemp("stubs"))
    srv = start_server(tmp_path_factory.mktemp("server"), repo)
    try:
        with grpc.insecure_channel(srv.address) as channel:
            stub = kv_grpc.GRPCInferenceServiceStub(channel)
            x = normalised(images[:3])
            req = grpc_infer(kv, MODEL, x)
            req.model_version = "1"
            stub.ModelInfer(req, timeout=60)
            req.model_version = "2"
            for _ in range(2):
                stub.ModelInfer(req, timeout=60)
            stats = stub.ModelStatistics(kv.ModelStatisticsRequest(name=MODEL), timeout=10)
            by_version = {s.version: s for s in stats.model_stats}
            assert set(by_version) == {"1", "2"}
            assert by_version["1"].inference_stats.success.count == 3
            assert by_version["2"].inference_stats.success.count == 6
            assert by_version["1"].inference_count == 3 and by_version["2"].inference_count == 6
            one = stub.ModelStatistics(kv.ModelStatisticsRequest(name=MODEL, version="2"),
                                       timeout=10).model_stats
            assert [s.version for s in one] == ["2"]
    finally:
        assert stop_server(srv) == 0, srv.log()
