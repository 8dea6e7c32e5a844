"""Python client for the gatescope inference server.

    from gatescope_client import Client
    client = Client("http://127.0.0.1:8000")
    client.predict("dgvit_fmnist", open("shoe.png", "rb").read())["classes"]
    maps = client.explain("dgvit_fmnist", pixels, rollout=True, gates=True)
    maps["rollout"]            # numpy float32 [grid_h, grid_w]
    client.infer("dgvit_fmnist", batch)["logits"]   # numpy, KServe v2 binary tensors
"""
from gatescope_client.client import Client, GatescopeError, TransportError, TransportTimeout

__all__ = ["Client", "GatescopeError", "TransportError", "TransportTimeout"]
