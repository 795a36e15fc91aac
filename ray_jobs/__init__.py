"""pmcvl: PubMed Central Open Access articles to biomedical vision-language training data."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pmcvl")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+local"
