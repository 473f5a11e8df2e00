"""Packaging for lbsim (tool configuration lives in pyproject.toml)."""

from setuptools import find_packages, setup

setup(
    name="lbsim",
    version="0.1.0",
    description="Simulate and measure straggler-mitigation synchronization schemes for distributed training",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["lbsim", "lbsim.*", "simulator", "simulator.*", "runtime", "runtime.*"]),
    package_data={"lbsim.numerics": ["data/*.gz", "data/README.md"]},
    install_requires=["numpy>=1.24", "scipy>=1.10", "simpy>=4.1", "pyyaml>=6.0", "rich>=13.0"],
    extras_require={
        "runtime": ["torch==2.13.0", "psutil>=5.9"],
        "plot": ["matplotlib>=3.7"],
        "cluster": ["dask[distributed]>=2024.1"],
        "dev": ["pytest>=8", "pytest-benchmark>=4", "hypothesis>=6.100", "ruff>=0.5", "mypy>=1.10", "types-PyYAML",
                "matplotlib>=3.7", "dask[distributed]>=2024.1"],  # = the plot and cluster extras, for their tests
    },
    entry_points={"console_scripts": ["lbsim=lbsim.cli:main"]},
)
