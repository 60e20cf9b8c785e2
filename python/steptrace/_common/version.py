"""The package's version, in one place (pyproject.toml says the same; a test holds them equal)."""

__version__ = "0.1.0"
