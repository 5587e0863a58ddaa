"""attnwidget: self-attention you can see and play with in a notebook."""

from importlib.metadata import PackageNotFoundError, version

from .formulas import Attention, attention
from .long import LongAttention
from .long_widget import LongWidget
from .widget import AttentionWidget

try:
    __version__ = version("attnwidget")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = ["Attention", "AttentionWidget", "LongAttention", "LongWidget", "__version__", "attention"]
