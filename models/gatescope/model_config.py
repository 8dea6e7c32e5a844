"""The model metadata `gatescope.json`: built by one function, checked against its schema.

Every exported model carries its self-description as the TorchScript extra file
`gatescope.json`; the server parses it into `gatescope.v1.ModelConfig`
(proto/gatescope/v1/model_config.proto) with protobuf's JSON parser and refuses unknown
fields. `metadata_json(meta)` is the one function that turns an exporter's metadata dict
into that file's text: it parses the dict into the same message with protobuf's
json_format, unknown fields refused, so a misspelt key or a value of the wrong type fails
the export instead of the server's load. The text written is the dict itself
(`json.dumps`), field names exactly as given (the proto's names).

How this package gets the message class without committing generated code: the first
validation in a process runs protoc (Debian's protobuf-compiler, the compiler the server's
build uses) on the checkout's .proto files (gatescope.paths.proto_dir) to write the schema
and its imports as one FileDescriptorSet into a temporary directory, and protobuf's own
descriptor pool and message factory build the class from it. Generating a
`model_config_pb2` module instead would need a directory added to the import path, whose
top-level package `gatescope` (the proto package gatescope.v1) would shadow this one and
whose code imports `inference.model_config_pb2` as another top-level module; and a cached
module would go stale whenever the .proto changes. The descriptor set needs neither: it is
rebuilt from the current .proto once per process (one protoc run, tens of milliseconds) and
nothing is written outside the temporary directory.
"""
import functools
import json
import pathlib
import shutil
import subprocess
import tempfile
from typing import Any, Mapping

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from gatescope import paths

METADATA_FILE = "gatescope.json"
SCHEMA_PROTO = "gatescope/v1/model_config.proto"
MESSAGE = "gatescope.v1.ModelConfig"


class InvalidModelConfig(ValueError):
    """The metadata does not parse as gatescope.v1.ModelConfig."""


@functools.lru_cache(maxsize=None)
def message_class():
    """The gatescope.v1.ModelConfig message class, compiled from the .proto on first use.

    Raises FileNotFoundError when the schema or protoc is missing, RuntimeError when protoc
    fails."""
    root = paths.proto_dir()
    if not (root / SCHEMA_PROTO).is_file():
        raise FileNotFoundError(f"{root / SCHEMA_PROTO} not found: set GATESCOPE_PROTO_DIR "
                                "to the checkout's proto/ directory")
    protoc = shutil.which("protoc")
    if protoc is None:
        raise FileNotFoundError("protoc not found: install Debian's protobuf-compiler "
                                "(scripts/setup.sh)")
    with tempfile.TemporaryDirectory(prefix="gatescope-schema-") as tmp:
        out = pathlib.Path(tmp) / "model_config.pb"
        run = subprocess.run([protoc, f"--proto_path={root}", f"--descriptor_set_out={out}",
                              "--include_imports", SCHEMA_PROTO],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"protoc failed on {root / SCHEMA_PROTO}:\n{run.stderr}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    pool = descriptor_pool.DescriptorPool()
    for f in files:  # --include_imports lists every file after the files it imports
        pool.AddSerializedFile(f.SerializeToString())
    descriptor = pool.FindMessageTypeByName(MESSAGE)
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get_class is not None:
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def parse(text: str):
    """`text` (gatescope.json contents) as a ModelConfig message; raises InvalidModelConfig
    for anything protobuf's JSON parser refuses (unknown fields, wrong types, bad JSON)."""
    try:
        return json_format.Parse(text, message_class()(), ignore_unknown_fields=False)
    except json_format.ParseError as e:
        raise InvalidModelConfig(f"not a valid {MESSAGE} ({SCHEMA_PROTO}): {e}") from None


def metadata_json(meta: Mapping[str, Any]) -> str:
    """The text of gatescope.json for the metadata `meta`, after checking that it parses as
    gatescope.v1.ModelConfig; raises InvalidModelConfig otherwise. Every exporter writes
    its metadata through this function."""
    if not isinstance(meta, Mapping):
        raise InvalidModelConfig(f"metadata must be a JSON object, not {type(meta).__name__}")
    try:
        text = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidModelConfig(f"metadata is not plain JSON: {e}") from None
    parse(text)
    return text
