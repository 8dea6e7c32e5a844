"""gatescope.json is built by one function (gatescope.model_config.metadata_json) that checks
it against gatescope.v1.ModelConfig, the message the server parses it into: malformed
metadata is refused before anything is written, and every shipped model's metadata parses."""
import json
import pathlib

import pytest
import torch

from gatescope import model_config
from gatescope.export.archive import read_metadata, save_model
from gatescope.model_config import InvalidModelConfig, metadata_json

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
SHIPPED = sorted((CHECKOUT / "model_repository").glob("*/1/model.pt"))

VALID = {
    "name": "m", "task": "image_classification", "arch": "vit",
    "input": {"shape": [1, 28, 28], "color": "gray", "scale": 1 / 255, "mean": [0.5],
              "std": [0.25]},
    "labels": ["a", "b"], "outputs": ["logits"], "token_grid": [7, 7], "cls_token": True,
    "maps": ["attention"], "required_ops": ["gatescope"], "max_batch_size": 8,
    "layers": 2, "heads": 4,
    "dar": {"strength": 0.4, "vigilance": 0.5, "sharpness": 8.0, "beta": 0.0, "steps": 1},
    "detection": {"encoder_layers": 1, "decoder_layers": 1, "levels": 2, "points": 4,
                  "queries": 10, "score_threshold": 0.3, "max_detections": 5,
                  "level_strides": [8, 16]},
}


def with_change(path, value):
    """VALID with the field at `path` (keys, outer first) set to `value`."""
    meta = json.loads(json.dumps(VALID))
    node = meta
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return meta


def test_valid_metadata_is_written_as_given():
    assert json.loads(metadata_json(VALID)) == VALID
    message = model_config.parse(metadata_json(VALID))
    assert list(message.detection.level_strides) == [8, 16]
    assert message.input.shape == [1, 28, 28] and message.cls_token


@pytest.mark.parametrize("path,value,match", [
    (("nmae",), "m", "no field named"),                         # unknown field
    (("input", "any_sized"), True, "no field named"),           # unknown nested field
    (("detection", "strides"), [8, 16], "no field named"),
    (("layers",), "four", "layers"),                            # wrong scalar types
    (("layers",), 2.5, "layers"),
    (("heads",), [4], "heads"),
    (("name",), 7, "name"),
    (("cls_token",), 1, "cls_token"),
    (("labels",), "a,b", "labels"),                             # repeated field not a list
    (("labels",), ["a", 2], "labels"),
    (("input",), [1, 28, 28], "input"),                         # message given a list
    (("input", "shape"), ["1", "x"], "shape"),
    (("detection", "level_strides"), [8.5, 16], "level_strides"),
    (("dar", "steps"), True, "steps"),
])
def test_malformed_metadata_is_refused(path, value, match):
    with pytest.raises(InvalidModelConfig, match=match):
        metadata_json(with_change(path, value))


def test_non_json_metadata_is_refused():
    with pytest.raises(InvalidModelConfig, match="JSON object"):
        metadata_json([VALID])
    with pytest.raises(InvalidModelConfig, match="plain JSON"):
        metadata_json(with_change(("layers",), torch.tensor(2)))
    with pytest.raises(InvalidModelConfig, match="plain JSON"):
        metadata_json(with_change(("input", "scale"), float("nan")))
    with pytest.raises(InvalidModelConfig):
        model_config.parse("{not json")


def test_save_model_refuses_before_writing(tmp_path):
    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    with pytest.raises(InvalidModelConfig, match="no field named"):
        save_model(scripted, tmp_path, "bad", "1", with_change(("lables",), []), {})
    assert not (tmp_path / "bad").exists()
    path = save_model(scripted, tmp_path, "good", "1", VALID, {"epochs": 1})
    assert read_metadata(path) == VALID
    extra = {"gatescope.json": ""}
    torch.jit.load(str(path), _extra_files=extra)
    assert json.loads(extra["gatescope.json"]) == VALID


def test_every_shipped_model_metadata_parses():
    assert len(SHIPPED) >= 10
    for path in SHIPPED:
        meta = read_metadata(path)
        message = model_config.parse(json.dumps(meta))
        assert message.name == path.parents[1].name, path


def test_archives_are_written_only_through_save_model():
    """No exporter writes a TorchScript archive (and so gatescope.json) around
    metadata_json: torch.jit.save appears in the package and the scripts only in
    gatescope/export/archive.py."""
    sources = [p for p in (CHECKOUT / "models").rglob("*.py") if "tests" not in p.parts]
    sources += list((CHECKOUT / "benchmarks").glob("*.py"))
    writers = [p.relative_to(CHECKOUT).as_posix() for p in sources
               if "torch.jit.save(" in p.read_text() or "_extra_files={" in p.read_text()]
    assert writers == ["models/gatescope/export/archive.py"]
