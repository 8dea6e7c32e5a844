from gatescope.networks.vit import ARCHS, VisionTransformer, VitConfig, build_classifier

__all__ = ["ARCHS", "VisionTransformer", "VitConfig", "build_classifier"]
