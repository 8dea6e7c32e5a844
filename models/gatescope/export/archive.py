"""Served model archives: <repo>/<name>/<version>/model.pt, TorchScript with two extra
files, `gatescope.json` (the metadata the server reads, gatescope.model_config) and
`training.json` (the training record: config, history, recipe)."""
import json
import pathlib
import zipfile
from typing import Any, Dict, Mapping, Optional

import torch

from gatescope.model_config import METADATA_FILE, metadata_json

TRAINING_FILE = "training.json"


def save_model(scripted, repo, name: str, version: str, meta: Mapping[str, Any],
               record: Mapping[str, Any]) -> pathlib.Path:
    """Writes <repo>/<name>/<version>/model.pt atomically (a complete file or none) with
    `meta` as gatescope.json and `record` as training.json; returns its path. Raises
    gatescope.model_config.InvalidModelConfig, before writing anything, when `meta` does
    not parse as gatescope.v1.ModelConfig."""
    meta_text = metadata_json(meta)
    out_dir = pathlib.Path(repo) / name / version
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "model.pt"
    tmp = out_dir / "model.pt.tmp"
    torch.jit.save(scripted, str(tmp), _extra_files={
        METADATA_FILE: meta_text, TRAINING_FILE: json.dumps(record, default=str)})
    tmp.replace(path)
    return path


def read_extra_file(path, name: str) -> Optional[str]:
    """The extra file `name` of the TorchScript archive at `path` (a zip whose entries sit
    under one top-level folder: <folder>/extra/<name>), or None; reads no model."""
    with zipfile.ZipFile(path) as z:
        for entry in z.namelist():
            parts = entry.split("/")
            if len(parts) == 3 and parts[1] == "extra" and parts[2] == name:
                return z.read(entry).decode("utf-8")
    return None


def read_metadata(path) -> Dict[str, Any]:
    """gatescope.json of the archive at `path`, as a dict; KeyError if it has none."""
    text = read_extra_file(path, METADATA_FILE)
    if text is None:
        raise KeyError(f"{path} has no {METADATA_FILE}")
    return json.loads(text)
