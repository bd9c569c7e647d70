"""wattio: intelligence functions of the storage hierarchy, with energy, performance and wear
measured side by side. See README.md."""

from wattio import _core, memory, trace
from wattio.api import Run, load, run
from wattio.function import Completion, Function, Io
from wattio.sweep import sweep

__version__ = _core.__version__

__all__ = ["Completion", "Function", "Io", "Run", "__version__", "load", "memory", "run", "sweep", "trace"]
