"""Dynamic batching changes how requests are executed, never what they get back: the same
requests sent at once to a server that batches them and to one that runs each alone return
the same outputs, for a classifier, a segmenter and a detector."""
import concurrent.futures
import shutil

import grpc
import numpy as np
import pytest

from server_harness import REPO, import_api_modules, start_server, stop_server
from gatescope.data import colin27, detection_scenes, fashion_mnist

N = 8  # requests sent at once, one example each
MODELS = ("dgvit_fmnist", "pvt_la_colin27", "detr_scenes")
CONFIGS = {
    "unbatched": ["--max_batch_size=1"],
    # A long delay so that requests sent together are executed together.
    "batched": [f"--max_batch_size={N}", "--max_queue_delay_us=300000"],
}


@pytest.fixture(scope="module")
def kv(tmp_path_factory):
    """The KServe messages and gRPC modules."""
    return import_api_modules(tmp_path_factory.mktemp("stubs"))[:2]


@pytest.fixture(scope="module")
def stubs(kv, tmp_path_factory):
    """One KServe stub per configuration, each on its own server over copies of MODELS
    (without config.pbtxt, so the flags decide the batching)."""
    repo = tmp_path_factory.mktemp("repo")
    for model in MODELS:
        shutil.copytree(REPO / "model_repository" / model, repo / model,
                        ignore=shutil.ignore_patterns("config.pbtxt"))
    servers, channels, out = [], [], {}
    try:
        for name, flags in CONFIGS.items():
            server = start_server(tmp_path_factory.mktemp(name), repo,
                                  extra=[*flags, "--torch_threads=1"])
            servers.append(server)
            channels.append(grpc.insecure_channel(server.address))
            out[name] = kv[1].GRPCInferenceServiceStub(channels[-1])
        yield out
    finally:
        for c in channels:
            c.close()
        for s in servers:
            stop_server(s)


def inputs(model):
    """N UINT8 images [H, W] a client of `model` would send."""
    if model == "dgvit_fmnist":
        images, _ = fashion_mnist.load_split("t10k")
        return list(images[9000:9000 + N])
    if model == "pvt_la_colin27":
        return list(colin27.load_slices()["test"]["images"][:N])
    return [s[0] for s in detection_scenes.make_scenes("heldout", N, seed=1234,
                                                       size_range=(128, 128))]


def infer_all_at_once(stub, pb, model, images):
    def one(image):
        req = pb.ModelInferRequest(model_name=model)
        req.inputs.add(name="input", datatype="UINT8", shape=[1, *image.shape])
        req.raw_input_contents.append(np.ascontiguousarray(image).tobytes())
        return stub.ModelInfer(req, timeout=120)
    with concurrent.futures.ThreadPoolExecutor(len(images)) as pool:
        return list(pool.map(one, images))


DTYPES = {"FP32": "<f4", "INT64": "<i8", "INT32": "<i4", "UINT8": "u1", "BOOL": "?"}


def outputs_of(resp):
    return {o.name: np.frombuffer(raw, dtype=DTYPES[o.datatype]).reshape(tuple(o.shape))
            for o, raw in zip(resp.outputs, resp.raw_output_contents)}


def executions(stub, pb, model):
    s = stub.ModelStatistics(pb.ModelStatisticsRequest(name=model)).model_stats[0]
    return s.inference_count, s.execution_count


@pytest.mark.parametrize("model", MODELS)
def test_batched_outputs_equal_unbatched_outputs(stubs, kv, model):
    pb = kv[0]
    images = inputs(model)
    got = {}
    for name, stub in stubs.items():
        before = executions(stub, pb, model)
        got[name] = [outputs_of(r) for r in infer_all_at_once(stub, pb, model, images)]
        after = executions(stub, pb, model)
        inferences, runs = after[0] - before[0], after[1] - before[1]
        assert inferences == N
        if name == "unbatched":
            assert runs == N
        else:
            assert runs < N, "the batched server ran every request alone"
    for i, (alone, batched) in enumerate(zip(got["unbatched"], got["batched"])):
        assert alone.keys() == batched.keys() and alone, (model, i)
        for out, want in alone.items():
            have = batched[out]
            assert have.shape == want.shape and have.dtype == want.dtype, (model, i, out)
            if have.dtype.kind == "f":
                np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{model} request {i} output {out}")
            else:
                # Labels (masks, classes) from scores equal to float rounding: at most one
                # element in ten thousand may flip.
                assert np.mean(have != want) <= 1e-4, (model, i, out)
