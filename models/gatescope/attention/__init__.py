from gatescope.attention.dar import DarParams, dar_reference, dar_reference_maps
from gatescope.attention.dgsa import MultiheadDGSA, dgsa_reference
from gatescope.attention.diff_attn import MultiheadDiffAttn
from gatescope.attention.mhsa import MultiheadSelfAttention

__all__ = ["DarParams", "MultiheadDGSA", "MultiheadDiffAttn", "MultiheadSelfAttention",
           "dar_reference", "dar_reference_maps", "dgsa_reference"]
