"""Packaging for lbsim (tool configuration lives in pyproject.toml)."""

import re

from setuptools import find_packages, setup

# One version, in lbsim/version.py (lbsim.__version__, lbsim --version, provenance.json).
VERSION = re.search(r'^__version__ = "([^"]+)"', open("lbsim/version.py", encoding="utf-8").read(), re.M).group(1)

setup(
    name="lbsim",
    version=VERSION,
    description="Simulate and measure straggler-mitigation synchronization schemes for distributed training",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # The engines live in the top-level folders simulator/ and runtime/ and are installed as lbsim.simulator and
    # lbsim.runtime: lbsim/simulator and lbsim/runtime are links to them (find_packages follows links), so the
    # installed, the editable and the source-tree import names are the same, and the generic names stay free.
    packages=find_packages(include=["lbsim", "lbsim.*"]),
    package_data={"lbsim.numerics": ["data/*.gz", "data/README.md"]},
    # polars: the native CSV/Parquet writer and reader of every table (a million rows in < 1 s);
    # scipy: lbsim calibrate's bounded least squares;
    # pandas: the Python API returns DataFrames (lbsim.simulate / compare / load);
    # isal: ISA-L's deflate for `--trace gz` (standard gzip bytes, ~4x zlib's fastest level, smaller files).
    install_requires=["numpy>=1.24", "scipy>=1.10", "simpy>=4.1", "pyyaml>=6.0", "rich>=13.0", "polars>=1.0", "pandas>=2.0",
                      "isal>=1.7"],
    extras_require={
        "runtime": ["torch>=2.4,<3", "psutil>=5.9"],
        "plot": ["matplotlib>=3.7"],
        "cluster": ["dask[distributed]>=2024.1"],
        "dev": ["pytest>=8", "pytest-benchmark>=4", "hypothesis>=6.100", "ruff>=0.5", "mypy>=1.10", "types-PyYAML",
                "matplotlib>=3.7", "dask[distributed]>=2024.1",  # = the plot and cluster extras, for their tests
                "pyarrow>=14",  # pandas.read_parquet, in the test that other readers type every table right
                "selenium>=4.10"],  # drives Debian's chromium + chromedriver in the advise.html browser test
    },
    entry_points={"console_scripts": ["lbsim=lbsim.cli:main"]},
)
