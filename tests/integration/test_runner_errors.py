"""How the server reports what a model raises, on a tiny model scripted here: a TorchScript
`raise ValueError(...)` on the model's input is the caller's fault (INVALID_ARGUMENT, with
the model's message), any other failure inside the model is INTERNAL, and neither stops
the server from serving the next request."""
import json

import grpc
import numpy as np
import pytest
import torch

from server_harness import api_stubs, start_server, stop_server

METADATA = {"name": "picky", "task": "image_classification",
            "input": {"shape": [1, 2, 2], "color": "gray"}, "labels": ["dark", "bright"],
            "outputs": ["logits"], "max_batch_size": 4}


class Picky(torch.nn.Module):
    """Refuses bright images (ValueError) and breaks on mid-grey ones (a shape error)."""

    def forward(self, x):
        mean = x.mean()
        if float(mean) > 0.9:
            raise ValueError("this model refuses bright images")
        if float(mean) > 0.4:
            return {"logits": x.view(7)}
        m = x.mean(dim=(1, 2, 3))
        return {"logits": torch.stack([0.5 - m, m], 1)}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    (repo / "picky" / "1").mkdir(parents=True)
    torch.jit.script(Picky()).save(str(repo / "picky" / "1" / "model.pt"),
                                   _extra_files={"gatescope.json": json.dumps(METADATA)})
    srv = start_server(tmp_path_factory.mktemp("server"), repo)
    yield srv
    assert stop_server(srv) == 0, srv.log()


@pytest.fixture(scope="module")
def stubs(served, tmp_path_factory):
    yield from api_stubs(served, tmp_path_factory)


def predict(v1, stub, value):
    pixels = np.full((2, 2), value, np.uint8)
    request = v1.PredictRequest(model_name="picky", tensor=v1.Tensor(
        dtype=v1.Tensor.UINT8, shape=[2, 2], data=pixels.tobytes()))
    return stub.Predict(request, timeout=30)


def test_value_error_is_invalid_argument_other_failures_internal(stubs):
    _, _, v1, stub = stubs
    assert predict(v1, stub, 0).classes[0].label == "dark"
    with pytest.raises(grpc.RpcError) as err:
        predict(v1, stub, 255)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "this model refuses bright images" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        predict(v1, stub, 128)
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert predict(v1, stub, 100).classes[0].label == "bright"  # still serving
