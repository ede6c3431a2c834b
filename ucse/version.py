"""The package's version (pyproject.toml's ``version``), in a leaf module that every layer may import."""

__version__ = "0.1.0"
