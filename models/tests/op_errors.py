"""The error measure the op tests share, on any device."""


def scaled_error(out, ref):
    """max |out - ref| / max(1, |ref|): absolute below 1, relative above (on the CPU, in
    float64)."""
    ref = ref.double().cpu()
    return float(((out.double().cpu() - ref).abs() / ref.abs().clamp_min(1.0)).max())
