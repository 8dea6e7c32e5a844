"""Drives a running gatescope server the way Triton's Python gRPC client does, with stubs
generated from this directory's own copy of the protocol (spec_proto/, not the server's
proto/), in a process of its own (the two copies share the `inference` package name, so
they cannot live in one process). Prints one JSON object of what came back; the caller
(test_triton_fidelity.py) checks the values.

usage: triton_client_check.py ADDRESS MODEL OUT_DIR < float32 images [N,1,28,28] (.npy)
"""
import importlib
import io
import json
import pathlib
import subprocess
import sys

import grpc
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def stubs(out_dir):
    subprocess.run(["protoc", f"--proto_path={HERE / 'spec_proto'}", f"--python_out={out_dir}",
                    f"--grpc_python_out={out_dir}",
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                    "grpc_service.proto"], check=True)
    sys.path.insert(0, str(out_dir))
    return (importlib.import_module("grpc_service_pb2"),
            importlib.import_module("grpc_service_pb2_grpc"))


def infer_request(pb, model, x, request_id, class_count=0, priority=0, outputs=("logits",)):
    """As tritonclient.grpc builds it: raw contents from numpy, outputs with class_count as
    an int64 "classification" parameter, priority as a uint64 parameter."""
    req = pb.ModelInferRequest(model_name=model, id=request_id)
    req.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
    req.raw_input_contents.append(x.astype("<f4").tobytes())
    for name in outputs:
        out = req.outputs.add(name=name)
        if class_count:
            out.parameters["classification"].int64_param = class_count
    if priority:
        req.parameters["priority"].uint64_param = priority
    return req


def raw_output(resp, name):
    i = [o.name for o in resp.outputs].index(name)
    o = resp.outputs[i]
    raw = resp.raw_output_contents[i]
    if o.datatype == "BYTES":
        items, pos = [], 0
        while pos < len(raw):
            n = int.from_bytes(raw[pos:pos + 4], "little")
            items.append(raw[pos + 4:pos + 4 + n].decode())
            pos += 4 + n
        return {"shape": list(o.shape), "data": items}
    return {"shape": list(o.shape), "data": np.frombuffer(raw, "<f4").tolist()}


def code_of(call):
    try:
        call()
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def main():
    address, model, out_dir = sys.argv[1:4]
    x = np.load(io.BytesIO(sys.stdin.buffer.read()))
    pb, pb_grpc = stubs(out_dir)
    result = {}
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        result["live"] = stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live
        result["ready"] = stub.ModelReady(pb.ModelReadyRequest(name=model), timeout=10).ready
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=model), timeout=10)
        result["outputs"] = [o.name for o in meta.outputs]
        cfg = stub.ModelConfig(pb.ModelConfigRequest(name=model), timeout=10).config
        result["max_batch_size"] = cfg.max_batch_size
        result["labels"] = json.loads(cfg.parameters["labels"].string_value)
        resp = stub.ModelInfer(infer_request(pb, model, x, "unary", priority=1), timeout=60)
        result["unary_id"] = resp.id
        result["logits"] = raw_output(resp, "logits")
        cls = stub.ModelInfer(infer_request(pb, model, x, "cls", class_count=3), timeout=60)
        result["classification"] = raw_output(cls, "logits")
        result["priority_99"] = code_of(lambda: stub.ModelInfer(
            infer_request(pb, model, x, "p", priority=99), timeout=60))
        # start_stream + async_stream_infer: one request per example, and one bad one.
        reqs = [infer_request(pb, model, x[i:i + 1], f"s{i}") for i in range(len(x))]
        reqs.append(infer_request(pb, "no_such_model", x[:1], "bad"))
        replies = list(stub.ModelStreamInfer(iter(reqs), timeout=120))
        result["stream"] = {r.infer_response.id: (r.error_message or
                                                  raw_output(r.infer_response, "logits"))
                            for r in replies}
        load = pb.RepositoryModelLoadRequest(model_name=model)
        load.parameters["config"].string_param = json.dumps({"max_batch_size": 2})
        result["load_with_config"] = code_of(lambda: stub.RepositoryModelLoad(load, timeout=30))
        stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name=model), timeout=10)
        s = stats.model_stats[0]
        result["stats"] = {"inference_count": s.inference_count,
                           "execution_count": s.execution_count,
                           "success": s.inference_stats.success.count,
                           "queue": s.inference_stats.queue.count,
                           "compute_infer": s.inference_stats.compute_infer.count,
                           "batches": {str(b.batch_size): b.compute_infer.count
                                       for b in s.batch_stats}}
        result["missing_version"] = code_of(lambda: stub.ModelStatistics(
            pb.ModelStatisticsRequest(name=model, version="42"), timeout=10))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
