from gatescope.attention.dgsa import MultiheadDGSA, dgsa_reference
from gatescope.attention.mhsa import MultiheadSelfAttention

__all__ = ["MultiheadDGSA", "MultiheadSelfAttention", "dgsa_reference"]
