"""wattio: intelligence functions of the storage hierarchy, with energy, performance and wear
measured side by side. See README.md."""

from wattio import _core

__version__ = _core.__version__
