from gatescope.networks.vit import VisionTransformer, VitConfig, build_classifier

__all__ = ["VisionTransformer", "VitConfig", "build_classifier"]
