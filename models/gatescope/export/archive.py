"""Served model archives: <repo>/<name>/<version>/model.pt, TorchScript with two extra
files, `gatescope.json` (the metadata the server reads, gatescope.model_config) and
`training.json` (the training record: config, history, recipe), plus any files an exporter
adds (e.g. a text model's `tokenizer.model`, raw bytes).

Extra files are stored byte for byte: torch.jit.load(path, _extra_files={name: ""}) gives
them back as bytes, C++ torch::jit::load (ExtraFilesMap) and caffe2's PyTorchStreamReader
as std::string, unchanged."""
import json
import pathlib
import zipfile
from typing import Any, Dict, Mapping, Optional

import torch

from gatescope.model_config import METADATA_FILE, metadata_json

TRAINING_FILE = "training.json"


def save_model(scripted, repo, name: str, version: str, meta: Mapping[str, Any],
               record: Mapping[str, Any],
               extra_files: Optional[Mapping[str, bytes]] = None) -> pathlib.Path:
    """Writes <repo>/<name>/<version>/model.pt atomically (a complete file or none) with
    `meta` as gatescope.json, `record` as training.json and each of `extra_files` (name ->
    bytes, stored unchanged) as an extra file of that name; returns its path. Raises
    gatescope.model_config.InvalidModelConfig, before writing anything, when `meta` does
    not parse as gatescope.v1.ModelConfig, and ValueError when an extra file would replace
    one of those two or its name is not a plain file name."""
    meta_text = metadata_json(meta)
    files: Dict[str, Any] = {METADATA_FILE: meta_text,
                             TRAINING_FILE: json.dumps(record, default=str)}
    for fname, data in (extra_files or {}).items():
        if fname in files or not fname or "/" in fname or "\\" in fname:
            raise ValueError(f"extra file name {fname!r} is reserved or not a file name")
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError(f"extra file {fname!r} must be bytes, not {type(data).__name__}")
        files[fname] = bytes(data)
    out_dir = pathlib.Path(repo) / name / version
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "model.pt"
    tmp = out_dir / "model.pt.tmp"
    torch.jit.save(scripted, str(tmp), _extra_files=files)
    tmp.replace(path)
    return path


def read_extra_bytes(path, name: str) -> Optional[bytes]:
    """The extra file `name` of the TorchScript archive at `path` (a zip whose entries sit
    under one top-level folder: <folder>/extra/<name>) as bytes, or None; reads no model."""
    with zipfile.ZipFile(path) as z:
        for entry in z.namelist():
            parts = entry.split("/")
            if len(parts) == 3 and parts[1] == "extra" and parts[2] == name:
                return z.read(entry)
    return None


def read_extra_file(path, name: str) -> Optional[str]:
    """The extra file `name` of the archive at `path` as UTF-8 text, or None."""
    data = read_extra_bytes(path, name)
    return None if data is None else data.decode("utf-8")


def read_metadata(path) -> Dict[str, Any]:
    """gatescope.json of the archive at `path`, as a dict; KeyError if it has none."""
    text = read_extra_file(path, METADATA_FILE)
    if text is None:
        raise KeyError(f"{path} has no {METADATA_FILE}")
    return json.loads(text)
