"""What the soak sends and how it checks each answer.

Every model of the repository is classified by its metadata's task (classifier,
segmenter, detector) and gets held-out inputs of its family: Fashion-MNIST test images
(classifiers), Colin27 held-out MRI slices (segmenters), generated held-out scenes
(detectors). A model of any other task, or with an input this file cannot make, stops the
soak: a new kind of model must get a workload before it ships.

Each input's reference answer is the server's own answer to one sequential gatescope.v1
Predict (the input as raw pixels), taken before any load, and that reference is itself
checked against the Python model (`torch.jit.load` of the same model.pt, the shared
pre/post-processing of `gatescope.segmentation` / `gatescope.detection`). Every answer of
the soak, on either API and for predictions and explanations alike, is compared with the
reference in a normal form:

- classifier: the probability vector over all labels (gatescope.v1: top_k = every label;
  KServe: softmax of the logits): every probability within CLS_PROB_TOL, and the same top
  label unless the reference's top two are within 2 * CLS_PROB_TOL;
- segmenter: the class map at the input's size: at most SEG_PIXEL_FRACTION of its pixels
  differ (batched and single convolutions round differently; only exact ties flip);
- detector: the detections (label, score, box): each reference detection has a partner of
  the same label with score within DET_SCORE_TOL and every box corner within DET_BOX_TOL
  pixels, and no unpartnered detection, except detections scoring within DET_SCORE_TOL of
  the threshold, which may fall on either side of it.
"""
import struct

import numpy as np

from gatescope.data import colin27, fashion_mnist
from gatescope.data import detection_scenes as ds
from gatescope.data.png import encode_gray_png

CLS_PROB_TOL = 1e-4
SEG_PIXEL_FRACTION = 1e-4
DET_SCORE_TOL = 1e-3
DET_BOX_TOL = 0.05
# Python model vs served reference (different kernels for some ops, TorchScript vs server):
PY_CLS_PROB_TOL = 1e-4
PY_SEG_PIXEL_FRACTION = 1e-4
PY_DET_SCORE_TOL = 1e-3
PY_DET_BOX_TOL = 0.05

FAMILIES = {"image_classification": "classifier", "image_segmentation": "segmenter",
            "object_detection": "detector"}
# Share of the closed-loop workers per family (soak_traffic.TrafficGroup). Measured on 2
# cores: a classifier forward takes ~10 ms, a detector's ~40 ms, a segmenter's ~260 ms.
CONCURRENCY_SHARE = {"classifier": 0.5, "segmenter": 0.25, "detector": 0.25}
FMNIST_START = 9000  # held-out test images


class Unsupported(Exception):
    pass


class Plan:
    """One served model: metadata, inputs, and (once computed) reference answers."""

    def __init__(self, name, version, config):
        self.name = name
        self.version = version  # the served (default) version at the start
        self.config = config
        self.family = FAMILIES.get(config.task)
        if self.family is None:
            raise Unsupported(f"{name}: no soak workload for task '{config.task}'")
        self.labels = list(config.labels)
        self.maps = set(config.maps)
        self.inputs = []      # uint8 [H, W]
        self.pngs = []
        self.reference = []   # normal forms
        self.threshold = (config.detection.score_threshold
                          if self.family == "detector" else None)


def build_plans(metadata, counts):
    """metadata: {name: (version, gatescope.v1 ModelConfig)}; counts: {family: inputs per
    model}."""
    plans = {n: Plan(n, v, c) for n, (v, c) in sorted(metadata.items())}
    cache = {}
    for p in plans.values():
        spec = p.config.input
        if spec.color != "gray":
            raise Unsupported(f"{p.name}: input colour '{spec.color}' (the soak has gray "
                              "inputs only)")
        k = counts[p.family]
        if p.family == "classifier":
            if list(spec.shape) != [1, 28, 28]:
                raise Unsupported(f"{p.name}: classifier input {list(spec.shape)}, the soak "
                                  "has Fashion-MNIST 1x28x28")
            if "fmnist" not in cache:
                cache["fmnist"] = fashion_mnist.load_split("t10k")[0]
            p.inputs = [np.ascontiguousarray(x) for x in
                        cache["fmnist"][FMNIST_START:FMNIST_START + k]]
        elif p.family == "segmenter":
            if not spec.any_size:
                raise Unsupported(f"{p.name}: segmenter without any_size")
            if "colin" not in cache:
                cache["colin"] = colin27.load_slices()["test"]["images"]
            imgs = cache["colin"]
            step = max(1, len(imgs) // k)
            p.inputs = [np.ascontiguousarray(imgs[i]) for i in range(0, len(imgs), step)][:k]
        else:
            if not ds.mnist_available():
                raise Unsupported("MNIST is missing: run scripts/fetch_mnist.sh")
            if "scenes" not in cache:
                n_large = max(1, k // 3)
                scenes = (ds.make_scenes("heldout", k - n_large, seed=1234)
                          + ds.make_scenes("heldout", n_large, seed=1234, start=k - n_large,
                                           size_range=(129, 200)))
                cache["scenes"] = [np.ascontiguousarray(s[0]) for s in scenes]
            p.inputs = cache["scenes"][:k]
            for img in p.inputs:
                if min(img.shape) < spec.min_side:
                    raise Unsupported(f"{p.name}: scene smaller than min_side")
        p.pngs = [encode_gray_png(x) for x in p.inputs]
    return plans


# ---------------------------------------------------------------------------- requests

class Call:
    """One request ready to send: `method` is an attribute of a Stubs' v1 or kv stub."""
    __slots__ = ("plan", "api", "kind", "method", "request", "idx", "variant")

    def __init__(self, plan, api, kind, method, request, idx, variant):
        self.plan, self.api, self.kind = plan, api, kind
        self.method, self.request, self.idx, self.variant = method, request, idx, variant

    def invoke(self, stubs, timeout, future=False):
        stub = stubs.v1 if self.api == "v1" else stubs.kv
        fn = getattr(stub, self.method)
        return fn.future(self.request, timeout=timeout) if future else \
            fn(self.request, timeout=timeout)


def _v1_input(apis, plan, i, variant):
    if variant == "png":
        return {"image": plan.pngs[i]}
    img = plan.inputs[i]
    return {"tensor": apis.v1.Tensor(dtype=apis.v1.Tensor.UINT8, shape=list(img.shape),
                                     data=img.tobytes())}


def v1_predict(apis, plan, i, variant="tensor", version=""):
    req = apis.v1.PredictRequest(model_name=plan.name, model_version=version,
                                 **_v1_input(apis, plan, i, variant))
    if plan.family == "classifier":
        req.top_k = len(plan.labels)
    return Call(plan, "v1", "predict", "Predict", req, [i], variant)


def v1_explain(apis, plan, i, rng, variant="png"):
    req = apis.v1.ExplainRequest(model_name=plan.name, **_v1_input(apis, plan, i, variant))
    if plan.family == "classifier":
        req.top_k = len(plan.labels)
        req.rollout = True
        req.gates = "gate" in plan.maps
        req.resonance = "resonance" in plan.maps
        if "plug_gate" in plan.maps:
            req.plug_gates = True
            req.attention_queries.append(0)
        if rng.random() < 0.5:
            req.attention_layers.append(int(rng.integers(plan.config.layers)))
    elif plan.family == "segmenter":
        h, w = plan.inputs[i].shape
        req.gates = "gate" in plan.maps
        req.query_pixel.y = int(rng.integers(h))
        req.query_pixel.x = int(rng.integers(w))
    else:
        req.plug_gates = "plug_gate" in plan.maps
    return Call(plan, "v1", "explain", "Explain", req, [i], variant)


def _normalised_fp32(plan, images):
    spec = plan.config.input
    scale = spec.scale or 1.0 / 255.0
    mean = spec.mean[0] if len(spec.mean) else 0.0
    std = spec.std[0] if len(spec.std) else 1.0
    return ((images.astype(np.float32) * np.float32(scale) - np.float32(mean))
            / np.float32(std)).astype("<f4")


def kserve_infer(apis, plan, idx, variant, explain=False, version=""):
    kv = apis.kv
    req = kv.ModelInferRequest(model_name=plan.name, model_version=version)
    imgs = np.stack([plan.inputs[i] for i in idx])
    b = len(idx)
    if variant == "bytes":
        req.inputs.add(name="input", datatype="BYTES", shape=[b])
        req.raw_input_contents.append(
            b"".join(struct.pack("<I", len(plan.pngs[i])) + plan.pngs[i] for i in idx))
    elif variant == "fp32":
        req.inputs.add(name="input", datatype="FP32", shape=[b, 1, *imgs.shape[1:]])
        req.raw_input_contents.append(_normalised_fp32(plan, imgs).tobytes())
    else:
        shape = [b, *imgs.shape[1:]] if plan.family == "classifier" else [b, 1, *imgs.shape[1:]]
        req.inputs.add(name="input", datatype="UINT8", shape=shape)
        req.raw_input_contents.append(imgs.tobytes())
    if plan.family == "classifier":
        if explain:
            kinds = ["rollout"] + (["gates"] if "gate" in plan.maps else [])
            req.parameters["explain"].string_param = ",".join(kinds)
        elif variant != "fp32":
            req.outputs.add(name="logits")  # fp32 calls take every output
    elif plan.family == "segmenter":
        req.outputs.add(name="mask")
    else:
        for name in ("detection_boxes", "detection_scores", "detection_classes",
                     "num_detections"):
            req.outputs.add(name=name)
    return Call(plan, "kserve", "explain" if explain else "infer", "ModelInfer", req,
                list(idx), variant)


def random_call(apis, plan, rng, api=None, explain=False):
    """A random request to `plan` on `api` (random if None)."""
    api = api or ("v1" if rng.random() < 0.5 else "kserve")
    n = len(plan.inputs)
    if api == "v1":
        i = int(rng.integers(n))
        variant = "png" if rng.random() < 0.5 else "tensor"
        if explain:
            return v1_explain(apis, plan, i, rng, variant)
        return v1_predict(apis, plan, i, variant)
    if plan.family == "classifier":
        b = int(rng.integers(1, 5))
        variant = ("uint8", "bytes", "fp32")[int(rng.integers(3))]
    elif plan.family == "segmenter":
        b, variant = int(rng.integers(1, 3)), "uint8"
    else:
        b, variant = 1, "uint8"
    if explain and plan.family != "classifier":
        return v1_explain(apis, plan, int(rng.integers(n)), rng)
    idx = [int(i) for i in rng.integers(n, size=b)]
    return kserve_infer(apis, plan, idx, variant, explain=explain and plan.family == "classifier")


# ---------------------------------------------------------------------- normal forms

def _probs_v1(classes, n):
    p = np.full(n, np.nan)
    for c in classes:
        p[c.index] = c.probability
    return p


def _softmax(logits):
    z = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _dets_v1(detections):
    return np.array([[d.label_index, d.score, d.x1, d.y1, d.x2, d.y2] for d in detections],
                    np.float64).reshape(-1, 6)


def _mask_v1(seg):
    return np.frombuffer(seg.mask.data, np.uint8).reshape(tuple(seg.mask.shape))


def _kserve_outputs(resp):
    return {o.name: (o, raw) for o, raw in zip(resp.outputs, resp.raw_output_contents)}


def normal_forms(call, resp):
    """The answers of `resp` in normal form, one per example of `call`."""
    plan = call.plan
    if call.api == "v1":
        if plan.family == "classifier":
            return [_probs_v1(resp.classes, len(plan.labels))]
        if plan.family == "segmenter":
            return [_mask_v1(resp.segmentation)]
        return [_dets_v1(resp.detections)]
    out = _kserve_outputs(resp)
    b = len(call.idx)
    if plan.family == "classifier":
        o, raw = out["logits"]
        logits = np.frombuffer(raw, "<f4").reshape(tuple(o.shape))
        return list(_softmax(logits.reshape(b, -1)))
    if plan.family == "segmenter":
        o, raw = out["mask"]
        return list(np.frombuffer(raw, np.uint8).reshape(tuple(o.shape)))
    o, raw = out["detection_boxes"]
    k = int(o.shape[1])
    boxes = np.frombuffer(raw, "<f4").reshape(b, k, 4)
    scores = np.frombuffer(out["detection_scores"][1], "<f4").reshape(b, k)
    classes = np.frombuffer(out["detection_classes"][1], "<i8").reshape(b, k)
    counts = np.frombuffer(out["num_detections"][1], "<i8")
    forms = []
    for j in range(b):
        n = int(counts[j])
        forms.append(np.concatenate([classes[j, :n, None].astype(np.float64),
                                     scores[j, :n, None].astype(np.float64),
                                     boxes[j, :n].astype(np.float64)], axis=1).reshape(-1, 6))
    return forms


# ---------------------------------------------------------------------- comparisons

def same_probs(got, ref, tol=CLS_PROB_TOL):
    if got.shape != ref.shape or np.isnan(got).any():
        return f"probabilities incomplete ({np.isnan(got).sum()} missing)"
    d = float(np.abs(got - ref).max())
    if d > tol:
        return f"max |dp| = {d:.2e} > {tol:g}"
    g, r = int(got.argmax()), int(ref.argmax())
    if g != r and ref[r] - ref[g] > 2 * tol:
        return f"top label {g} != {r}"
    return None


def same_mask(got, ref, fraction=SEG_PIXEL_FRACTION):
    if got.shape != ref.shape:
        return f"mask shape {got.shape} != {ref.shape}"
    bad = int((got != ref).sum())
    if bad > fraction * ref.size:
        return f"{bad} of {ref.size} pixels differ"
    return None


def same_detections(got, ref, threshold, score_tol=DET_SCORE_TOL, box_tol=DET_BOX_TOL):
    used = np.zeros(len(got), bool)
    for r in ref:
        partner = None
        for j, g in enumerate(got):
            if (not used[j] and g[0] == r[0] and abs(g[1] - r[1]) <= score_tol
                    and np.abs(g[2:] - r[2:]).max() <= box_tol):
                partner = j
                break
        if partner is None:
            if r[1] - threshold > score_tol:
                return f"missing detection label {int(r[0])} score {r[1]:.4f}"
        else:
            used[partner] = True
    for j, g in enumerate(got):
        if not used[j] and g[1] - threshold > score_tol:
            return f"extra detection label {int(g[0])} score {g[1]:.4f}"
    return None


def compare(plan, got, ref, python=False):
    """None if `got` matches `ref`, else why not."""
    if plan.family == "classifier":
        return same_probs(got, ref, PY_CLS_PROB_TOL if python else CLS_PROB_TOL)
    if plan.family == "segmenter":
        return same_mask(got, ref, PY_SEG_PIXEL_FRACTION if python else SEG_PIXEL_FRACTION)
    if python:
        return same_detections(got, ref, plan.threshold, PY_DET_SCORE_TOL, PY_DET_BOX_TOL)
    return same_detections(got, ref, plan.threshold)


def _explain_maps_problem(call, resp):
    """Shape checks of an Explain answer's maps (the answers themselves are compared)."""
    plan, req = call.plan, call.request
    cfg = plan.config
    if plan.family == "classifier":
        if list(resp.rollout.shape) != list(cfg.token_grid):
            return f"rollout shape {list(resp.rollout.shape)} != {list(cfg.token_grid)}"
        if req.gates and len(resp.gates) != cfg.layers:
            return f"{len(resp.gates)} gate maps for {cfg.layers} layers"
        if req.resonance and len(resp.resonance) != cfg.layers:
            return f"{len(resp.resonance)} resonance maps for {cfg.layers} layers"
        if req.plug_gates and len(resp.plug_gates) != cfg.layers:
            return f"{len(resp.plug_gates)} PLuG gate maps for {cfg.layers} layers"
        if len(resp.attention) != len(req.attention_layers):
            return f"{len(resp.attention)} attention maps for {len(req.attention_layers)} layers"
    elif plan.family == "segmenter":
        if len(resp.query_attention) != cfg.layers:
            return f"{len(resp.query_attention)} query maps for {cfg.layers} stages"
        if req.gates and len(resp.gates) != cfg.layers:
            return f"{len(resp.gates)} gate maps for {cfg.layers} stages"
    else:
        if len(resp.detection_maps) != len(resp.detections):
            return f"{len(resp.detection_maps)} maps for {len(resp.detections)} detections"
        if req.plug_gates and len(resp.encoder_plug_gates) != \
                cfg.detection.encoder_layers * cfg.detection.levels:
            return f"{len(resp.encoder_plug_gates)} encoder gate maps"
    return None


def check(call, resp):
    """None if every answer of `resp` matches its input's reference, else why not."""
    plan = call.plan
    if call.kind == "explain":
        if call.api == "v1":
            problem = _explain_maps_problem(call, resp)
            if problem:
                return problem
        else:
            names = {o.name for o in resp.outputs}
            if "rollout" not in names:
                return f"KServe explain without rollout output: {sorted(names)}"
    try:
        if call.api == "v1" and plan.family == "segmenter" and call.kind == "predict":
            seg = resp.segmentation
            mask = _mask_v1(seg)
            counts = np.bincount(mask.ravel(), minlength=len(plan.labels)).tolist()
            if list(seg.class_pixels) != counts:
                return "class_pixels disagree with the mask"
        forms = normal_forms(call, resp)
    except (KeyError, ValueError, IndexError) as e:
        return f"malformed answer: {type(e).__name__}: {e}"
    if len(forms) != len(call.idx):
        return f"{len(forms)} answers for {len(call.idx)} inputs"
    for i, got in zip(call.idx, forms):
        problem = compare(plan, got, plan.reference[i])
        if problem:
            return f"input {i}: {problem}"
    return None


# ------------------------------------------------------------------------- references

def server_references(apis, plans, stubs, timeout=120):
    """Each input's answer to one sequential gatescope.v1 Predict (raw pixels)."""
    for p in plans.values():
        p.reference = []
        for i in range(len(p.inputs)):
            call = v1_predict(apis, p, i, "tensor")
            p.reference.append(normal_forms(call, call.invoke(stubs, timeout))[0])


def python_references(plans, repository):
    """{model: [problem or None per input]}: the Python model's answers compared with the
    served references (classifier probabilities, segmentation maps, detections)."""
    import torch
    from gatescope import detection, ops, segmentation
    torch.set_num_threads(1)
    ops.load()
    out = {}
    for p in plans.values():
        path = repository / p.name / p.version / "model.pt"
        model = torch.jit.load(str(path))
        problems = []
        with torch.no_grad():
            if p.family == "classifier":
                x = torch.from_numpy(_normalised_fp32(p, np.stack(p.inputs)))[:, None]
                probs = torch.softmax(model(x)["logits"].double(), -1).numpy()
                problems = [compare(p, probs[i], p.reference[i], python=True)
                            for i in range(len(p.inputs))]
            elif p.family == "segmenter":
                size = tuple(p.config.input.shape[1:])
                for i, img in enumerate(p.inputs):
                    x = torch.from_numpy(img).view(1, 1, *img.shape)
                    mask = segmentation.segment(lambda t: model(t)["logits"], x, size)[0]
                    problems.append(compare(p, mask.numpy().astype(np.uint8), p.reference[i],
                                            python=True))
            else:
                for i, img in enumerate(p.inputs):
                    d = detection.detect(model, img, p.threshold)
                    dets = np.concatenate([d["labels"][:, None].double().numpy(),
                                           d["scores"][:, None].double().numpy(),
                                           d["boxes"].double().numpy()], axis=1).reshape(-1, 6)
                    problems.append(compare(p, dets, p.reference[i], python=True))
        out[p.name] = problems
    return out
