"""Reference outputs of every shipped model under this machine's PyTorch (1.13, CPU), for
scripts/gpu/torchscript_compat.py to compare a newer PyTorch / CUDA against.

For each model_repository/<name>/1/model.pt it reads gatescope.json, builds a small
deterministic batch of valid inputs of the model's task from real data on this machine:

  image_classification  the first 4 Fashion-MNIST test images, normalised as the metadata says;
  object_detection      2 held-out Fashion-MNIST scenes of 112 x 112 (native size; the
                        graph pads them to its 128 canvas), normalised as the metadata says;
  image_segmentation    2 held-out Colin27 slices resized to 96 x 64 and min-max scaled
                        (a multiple of 32 smaller than 224 x 192, to keep the file small);
  text_classification   3 texts tokenized by the archive's own tokenizer, right-padded,
                        mask True at pieces (the shorter rows carry padding);

runs forward with the fused ops active (op library loaded, torch.inference_mode, as the
server runs) and one explain pass on the first example (explain_begin / explain_layer for
every layer / explain_end; segmenters with the query [0.5, 0.5]), and saves everything
(CPU tensors, torch.save, weights_only-loadable) into <out>/torchscript_reference.pt.

  /usr/bin/python3 scripts/gpu/torchscript_reference.py --out .gpu_carry
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from torchscript_compat import ROOT, load_ops, run_model  # noqa: E402  (adds models/)

TEXTS = {"spam": ["Congratulations!!! You have WON a $1000 gift card. Click "
                  "http://example.com/claim now to claim your prize before midnight",
                  "Hi Bob, the meeting moved to Thursday at 3pm; agenda attached. Alice",
                  "ok thanks"],
         "wordnet": ["a domesticated carnivorous mammal that typically has a long snout",
                     "a building where people live",
                     "the act of running"]}


def normalise(x_uint8, meta):
    inp = meta["input"]
    x = torch.from_numpy(np.array(x_uint8)).float() * inp["scale"]
    return (x - inp["mean"][0]) / inp["std"][0]


def image_inputs(meta):
    from gatescope.data import fashion_mnist
    images, _ = fashion_mnist.load_split("t10k")
    return [normalise(images[:4], meta).unsqueeze(1)]


def detection_inputs(meta):
    from gatescope.data import detection_scenes
    scenes = detection_scenes.make_scenes("heldout", 2, seed=7, size_range=(112, 112),
                                          sources=("fashion",))
    return [normalise(np.stack([s[0] for s in scenes]), meta).unsqueeze(1)]


def segmentation_inputs(meta):
    from gatescope import segmentation
    from gatescope.data import colin27
    test = colin27.load_slices()["test"]["images"]
    images = torch.from_numpy(test[[len(test) // 3, 2 * len(test) // 3]]).unsqueeze(1)
    return [segmentation.preprocess(images, (96, 64))]


def text_inputs(path, meta):
    from gatescope.text_tokenizer import Tokenizer
    tok = Tokenizer.from_archive(path, meta)
    texts = TEXTS["spam" if "spam" in meta["name"] else "wordnet"]
    ids = [tok.encode(t)[:meta["text"]["max_tokens"]] for t in texts]
    length = max(len(i) for i in ids)
    token_ids = torch.full((len(ids), length), meta["text"]["pad_id"], dtype=torch.int64)
    mask = torch.zeros(len(ids), length, dtype=torch.bool)
    for r, row in enumerate(ids):
        token_ids[r, :len(row)] = torch.tensor(row)
        mask[r, :len(row)] = True
    return [token_ids, mask], [token_ids[:1, :len(ids[0])], mask[:1, :len(ids[0])]]


def entry_for(path):
    from gatescope.export.archive import read_metadata
    model = torch.jit.load(str(path), map_location="cpu").eval()
    meta = read_metadata(path)
    task, args = meta["task"], torch.zeros(0, dtype=torch.float64)
    if task == "text_classification":
        inputs, explain_inputs = text_inputs(path, meta)
    else:
        inputs = {"image_classification": image_inputs, "object_detection": detection_inputs,
                  "image_segmentation": segmentation_inputs}[task](meta)
        explain_inputs = [t[:1] for t in inputs]
        if task == "image_segmentation":  # a tensor: 1.13's weights_only load takes no floats
            args = torch.tensor([0.5, 0.5], dtype=torch.float64)
    entry = {"task": task, "meta": json.dumps(meta), "inputs": inputs,
             "explain_inputs": explain_inputs, "explain_args": args,
             "explain_layers": int(meta.get("layers", 0)) if meta.get("maps") else 0}
    runs, maps = run_model(model, entry, "cpu")
    entry["outputs"], entry["explain"] = runs[0], maps
    return entry


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=str(ROOT / "model_repository"))
    p.add_argument("--out", default=str(ROOT / ".gpu_carry"))
    a = p.parse_args()
    torch.set_num_threads(2)
    print("ops:", load_ops())
    ref = {"torch": str(torch.__version__), "models": {}}
    for path in sorted(pathlib.Path(a.repo).glob("*/1/model.pt")):
        name = path.parent.parent.name
        ref["models"][name] = e = entry_for(path)
        shapes = {k: tuple(v.shape) for k, v in e["outputs"].items()}
        print(f"{name:24} {e['task']:21} inputs {[tuple(t.shape) for t in e['inputs']]} "
              f"outputs {shapes} explain tensors {len(e['explain'])}")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(ref, out / "torchscript_reference.pt")
    size = (out / "torchscript_reference.pt").stat().st_size
    print(f"wrote {out / 'torchscript_reference.pt'} ({size / 2**20:.2f} MiB, "
          f"{len(ref['models'])} models)")


if __name__ == "__main__":
    main()
