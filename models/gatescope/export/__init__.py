"""Export to served models: TorchScript archives that describe themselves.

archive             writes <repo>/<name>/<version>/model.pt with gatescope.json (through
                    gatescope.model_config.metadata_json, checked against the schema) and
                    training.json; reads them back
classifier          Fashion-MNIST classifiers (models/export.py)
detector            (PLuG) Deformable DETR detectors (models/export_detector.py)
convert_gdla        PVT-GDLA / PVT-LinearAttn checkpoints (models/convert_gdla.py)
segmentation_card   held-out Dice model cards of the segmenters (models/segmentation_card.py)
"""
